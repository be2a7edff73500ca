// The leaderboard's ranking: sort by a column, filter by quant and by text, without a reload.
// Without this script the quant filter is a plain form and the table comes sorted by the headline.
(function () {
  "use strict";

  function start() {
    var table = document.getElementById("ranking");
    if (!table) { return; }
    var body = table.tBodies[0];
    var quant = document.querySelector("[data-filter=quant]");
    var search = document.querySelector("[data-filter=text]");
    search.closest("label").hidden = false;

    function filter() {
      var q = quant.value, words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
      Array.prototype.forEach.call(body.rows, function (row) {
        var text = row.getAttribute("data-text") || "";
        var ok = (!q || row.getAttribute("data-quant") === q) &&
          words.every(function (word) { return text.indexOf(word) >= 0; });
        row.hidden = !ok;
      });
    }
    quant.addEventListener("change", filter);
    search.addEventListener("input", filter);

    var headers = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(headers, function (th, index) {
      var kind = th.getAttribute("data-sort");
      if (!kind) { return; }
      var button = document.createElement("button");
      button.type = "button";
      while (th.firstChild) { button.appendChild(th.firstChild); }
      th.appendChild(button);
      button.addEventListener("click", function () {
        var descending = th.getAttribute("aria-sort") !== "descending";
        Array.prototype.forEach.call(headers, function (other) { other.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", descending ? "descending" : "ascending");
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = a.cells[index].getAttribute("data-value"), y = b.cells[index].getAttribute("data-value");
          var order = kind === "number" ? parseFloat(x) - parseFloat(y) : x.localeCompare(y);
          return descending ? -order : order;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
    filter();
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
