// The metrics dashboard's charts: data from the page's json_script, colours from the admin's
// CSS variables, so the charts follow its light and dark themes (and its theme toggle).
"use strict";

(function () {
  const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
    "#ff9da7", "#9c755f", "#bab0ac"];
  const FIXED = {
    COMPLETED: "#59a14f", ERROR: "#e15759", CANCELLED: "#f28e2b", INTERRUPTED: "#b07aa1",
    RUNNING: "#4e79a7", PENDING: "#bab0ac", PAUSED: "#76b7b2", background: "#bab0ac",
    up: "#59a14f", down: "#e15759",
    p50: "#4e79a7", p95: "#f28e2b", chat: "#4e79a7",
  };
  const LINES = new Set(["first_token"]);
  const UNITS = {
    usd: (v) => "$" + Number(v).toFixed(v >= 1 ? 2 : 4),
    seconds: (v) => Number(v).toFixed(2) + " s",
    score: (v) => Number(v).toFixed(2),
    percent: (v) => Number(v).toFixed(0) + " %",
  };

  function themeColours() {
    const style = getComputedStyle(document.documentElement);
    const read = (name, fallback) => style.getPropertyValue(name).trim() || fallback;
    return {
      text: read("--body-fg", "#333"),
      quiet: read("--body-quiet-color", "#666"),
      grid: read("--hairline-color", "#e8e8e8"),
    };
  }

  // A chart another app adds says it is drawn as lines with its "type".
  const isLine = (key, chart) => chart.type === "line" || LINES.has(key);

  function datasets(key, chart) {
    const line = isLine(key, chart);
    return chart.datasets.map((set, i) => {
      const colour = FIXED[set.key] || FIXED[set.key.replace(/^model:/, "")] || PALETTE[i % PALETTE.length];
      return {
        label: set.label,
        data: set.data,
        backgroundColor: colour,
        borderColor: colour,
        borderWidth: line ? 2 : 0,
        spanGaps: true,
        pointRadius: line ? 2 : 0,
      };
    });
  }

  function options(key, chart, colours) {
    const format = UNITS[chart.unit] || ((v) => Number(v).toLocaleString());
    const stacked = !isLine(key, chart);
    const axis = (extra) => ({
      stacked, ticks: { color: colours.quiet, ...extra }, grid: { color: colours.grid },
    });
    return {
      responsive: true,
      maintainAspectRatio: false,
      animation: false,
      interaction: { mode: "index", intersect: false },
      scales: { x: axis({}), y: axis({ callback: format }) },
      plugins: {
        legend: { labels: { color: colours.text, boxWidth: 12 } },
        tooltip: { callbacks: { label: (c) => `${c.dataset.label}: ${c.parsed.y === null ? "—" : format(c.parsed.y)}` } },
      },
    };
  }

  function draw() {
    const source = document.getElementById("dashboard-charts");
    if (!source || typeof Chart === "undefined") return;
    const data = JSON.parse(source.textContent);
    const colours = themeColours();
    const charts = [];
    for (const canvas of document.querySelectorAll("canvas[data-chart]")) {
      const key = canvas.dataset.chart;
      const chart = data[key];
      if (!chart) continue;
      charts.push(new Chart(canvas, {
        type: isLine(key, chart) ? "line" : "bar",
        data: { labels: chart.labels, datasets: datasets(key, chart) },
        options: options(key, chart, colours),
      }));
    }
    const recolour = () => {
      const now = themeColours();
      for (const chart of charts) {
        const key = chart.canvas.dataset.chart;
        chart.options = options(key, data[key], now);
        chart.update();
      }
    };
    window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", recolour);
    new MutationObserver(recolour).observe(document.documentElement, {
      attributes: true, attributeFilter: ["data-theme"],
    });
  }

  document.addEventListener("DOMContentLoaded", draw);
})();
