// An experiment's page: its charts, one per scorer (each version's mean as a point on its 95 %
// interval drawn as a floating bar; data from the page's json_script; colours from the admin's
// CSS variables, so the charts follow its light and dark themes and its theme toggle), and
// word of a progress poll that fails.
"use strict";

(function () {
  const INTERVAL = "rgba(78, 121, 167, 0.35)";
  const MEAN = "#4e79a7";

  function themeColours() {
    const style = getComputedStyle(document.documentElement);
    const read = (name, fallback) => style.getPropertyValue(name).trim() || fallback;
    return {
      text: read("--body-fg", "#333"),
      quiet: read("--body-quiet-color", "#666"),
      grid: read("--hairline-color", "#e8e8e8"),
    };
  }

  const shown = (v) => (v === null || v === undefined ? "—" : Number(v).toPrecision(3));

  function options(chart, colours) {
    const scale = Array.isArray(chart.scale) && chart.scale.length === 2 ? chart.scale : null;
    const axis = (extra) => ({ ticks: { color: colours.quiet }, grid: { color: colours.grid }, ...extra });
    return {
      responsive: true,
      maintainAspectRatio: false,
      animation: false,
      scales: {
        x: axis({}),
        y: axis(scale ? { suggestedMin: scale[0], suggestedMax: scale[1] } : {}),
      },
      plugins: {
        legend: { labels: { color: colours.text, boxWidth: 12 } },
        tooltip: {
          callbacks: {
            label: (c) => {
              const raw = c.raw;
              if (Array.isArray(raw)) return `95 % interval: ${shown(raw[0])} to ${shown(raw[1])}`;
              return `mean: ${shown(raw)}`;
            },
          },
        },
      },
    };
  }

  function draw() {
    const source = document.getElementById("experiment-charts");
    if (!source || typeof Chart === "undefined") return;
    const data = JSON.parse(source.textContent);
    const charts = [];
    for (const canvas of document.querySelectorAll("canvas[data-chart]")) {
      const chart = data[canvas.dataset.chart];
      if (!chart) continue;
      charts.push(new Chart(canvas, {
        type: "bar",
        data: {
          labels: chart.labels,
          datasets: [
            { label: "95 % interval", data: chart.intervals, backgroundColor: INTERVAL, borderWidth: 0 },
            {
              type: "line", label: "mean", data: chart.means, showLine: false,
              pointRadius: 5, pointBackgroundColor: MEAN, borderColor: MEAN,
            },
          ],
        },
        options: options(chart, themeColours()),
      }));
    }
    const recolour = () => {
      const now = themeColours();
      for (const chart of charts) {
        chart.options = options(data[chart.canvas.dataset.chart], now);
        chart.update();
      }
    };
    window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", recolour);
    new MutationObserver(recolour).observe(document.documentElement, {
      attributes: true, attributeFilter: ["data-theme"],
    });
  }

  // The progress box polls the server: when a poll fails (the server down or unreachable, or
  // an error answer), say so until one succeeds; htmx keeps polling meanwhile.
  function lostNotice() {
    return document.querySelector("#experiment-progress [data-testid=progress-lost]");
  }

  function polled(event) {
    return event.detail && event.detail.elt && event.detail.elt.id === "experiment-progress";
  }

  function watchContact() {
    const lost = (event) => {
      const notice = polled(event) && lostNotice();
      if (notice) notice.hidden = false;
    };
    document.addEventListener("htmx:sendError", lost);
    document.addEventListener("htmx:responseError", lost);
    document.addEventListener("htmx:afterRequest", (event) => {
      const notice = polled(event) && event.detail.successful && lostNotice();
      if (notice) notice.hidden = true;
    });
  }

  document.addEventListener("DOMContentLoaded", draw);
  watchContact();
})();
