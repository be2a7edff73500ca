// Draws every figure the server embedded as a JSON data island next to a [data-figure] element.
// Tables carry the same numbers, so the page stays readable when this script does not run.
(function () {
  "use strict";
  function draw() {
    if (typeof Plotly === "undefined") { return; }
    document.querySelectorAll("[data-figure]").forEach(function (target) {
      var island = document.getElementById(target.getAttribute("data-figure"));
      if (!island) { return; }
      var figure = JSON.parse(island.textContent);
      // With responsive on, plotly fills its container's height, so the container takes the figure's.
      if (figure.layout && figure.layout.height) { target.style.height = figure.layout.height + "px"; }
      Plotly.newPlot(target, figure.data, figure.layout, {
        responsive: true, displaylogo: false, modeBarButtonsToRemove: ["select2d", "lasso2d"]
      });
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
