// Every page: the "Copy to clipboard" button of a Markdown export, and a visible hint on tables
// wider than their box (overlay scrollbars show nothing until touched). Pages work without it.
(function () {
  "use strict";
  document.documentElement.classList.add("js");

  function copyButtons() {
    document.querySelectorAll("button[data-copy-from]").forEach(function (button) {
      var source = document.getElementById(button.getAttribute("data-copy-from"));
      var status = button.parentNode.querySelector(".copy-status");
      if (!source || !navigator.clipboard) { return; }
      button.hidden = false;
      button.addEventListener("click", function () {
        navigator.clipboard.writeText(source.value).then(
          function () { status.textContent = "Copied."; },
          function () { source.select(); status.textContent = "Select all and copy (the browser refused)."; }
        );
      });
    });
  }

  // A wrapped table that overflows gets a shadow on the side that has more, and a line above it.
  function scrollHints() {
    document.querySelectorAll(".table-wrap").forEach(function (wrap) {
      var hint = wrap.previousElementSibling && wrap.previousElementSibling.classList.contains("scroll-hint")
        ? wrap.previousElementSibling : null;
      if (!hint) {
        hint = document.createElement("p");
        hint.className = "scroll-hint";
        hint.textContent = "This table is wider than the screen: scroll it sideways for every batch size →";
        wrap.parentNode.insertBefore(hint, wrap);
      }
      function update() {
        var scrolls = wrap.scrollWidth > wrap.clientWidth + 1;
        wrap.classList.toggle("scrolls", scrolls);
        wrap.classList.toggle("at-end", wrap.scrollLeft + wrap.clientWidth >= wrap.scrollWidth - 1);
        hint.classList.toggle("shown", scrolls);
      }
      wrap.addEventListener("scroll", update, {passive: true});
      window.addEventListener("resize", update);
      update();
    });
  }

  function start() { copyButtons(); scrollHints(); }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
