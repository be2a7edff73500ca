// Draws every figure the server embedded as a JSON data island next to a [data-figure] element.
// Tables carry the same numbers, so the page stays readable when this script does not run.
(function () {
  "use strict";
  var LEGEND_ROW_PX = 24;  // as in benchhub/web/charts.py

  // The server lays a figure out for a wide screen: the legend a list right of the plot, ticks
  // "BS8". On a phone-width plot the legend moves under it, one entry a line, the figure growing
  // by its lines so that none hides behind a scrollbar, and the ticks shrink to bare numbers.
  function fitToPhone(target, layout, data) {
    if (!narrow(target)) { return; }
    if (layout.legend && layout.legend.orientation === "v" && layout.showlegend !== false) {
      var entries = data.filter(function (trace) { return trace.showlegend !== false; }).length;
      var lines = LEGEND_ROW_PX * entries + 16;
      layout.margin.b += lines;
      layout.height = 320 + layout.margin.b;
      layout.legend = {orientation: "v", x: 0, xanchor: "left", yref: "container", y: 0, yanchor: "bottom",
                       font: layout.legend.font, maxheight: lines, tracegroupgap: 0};
    }
    // A title wider than the phone was cut: it breaks after its first colon instead.
    if (layout.title && layout.title.text && layout.title.text.indexOf(": ") > 0) {
      layout.title.text = layout.title.text.replace(": ", ":<br>");
      layout.margin.t += 20;
    }
    if (layout.xaxis && layout.xaxis.ticktext) {
      layout.xaxis.ticktext = layout.xaxis.tickvals.map(String);
      layout.xaxis.title = {text: "batch size"};
    }
  }

  function narrow(target) { return target.clientWidth < 640; }

  function draw() {
    if (typeof Plotly === "undefined") { return; }
    document.querySelectorAll("[data-figure]").forEach(function (target) {
      var island = document.getElementById(target.getAttribute("data-figure"));
      if (!island) { return; }
      var figure = JSON.parse(island.textContent);
      fitToPhone(target, figure.layout, figure.data);
      // With responsive on, plotly fills its container's height, so the container takes the figure's.
      if (figure.layout && figure.layout.height) { target.style.height = figure.layout.height + "px"; }
      Plotly.newPlot(target, figure.data, figure.layout, {
        responsive: true, displaylogo: false, modeBarButtonsToRemove: ["select2d", "lasso2d"],
        displayModeBar: narrow(target) ? false : "hover"
      });
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
