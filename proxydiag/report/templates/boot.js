(function () {
  // draw every figure; window.proxydiagPlotted counts the figures drawn (tests wait on it)
  window.proxydiagPlotted = 0;
  var figs = JSON.parse(document.getElementById("proxydiag-figures").textContent);
  var config = { responsive: true, displaylogo: false, displayModeBar: false };
  figs.forEach(function (f) {
    Plotly.newPlot(document.getElementById(f.id), f.fig.data, f.fig.layout, config)
      .then(function () { window.proxydiagPlotted += 1; });
  });
})();
