// hpclaunch ui: the view's own script. It draws the curves (uPlot, vendored beside it) from each chart's data
// (data-src), and on a page that changes while jobs run (body data-live) it asks for the changed sections every
// data-interval seconds, puts them in place and adds the new points to the curves; it stops once the job has
// ended. It asks nothing of any other site. Without JavaScript the pages refresh themselves (<noscript> meta).
"use strict";
(function () {
  const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#be185d", "#4d7c0f"];
  const charts = {};  // element id -> {plot, el, x, ys, labels}
  const STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6];  // whole steps
  window.hpclaunchCharts = charts;

  function getJSON(url) {
    return fetch(url, {credentials: "same-origin", headers: {"Accept": "application/json"}}).then(function (r) {
      if (!r.ok) { throw new Error(url + ": " + r.status); }
      return r.json();
    });
  }

  function options(el, data) {
    const series = [{label: "step"}];
    data.series.forEach(function (s, i) {
      const one = {label: s.label, stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: true,
                   points: {show: !!s.points || data.x.length < 30, size: s.points ? 7 : 4}};
      if (s.points) { one.paths = function () { return null; }; }
      series.push(one);
    });
    return {width: Math.max(320, el.clientWidth || 640), height: 240, series: series,
            scales: {x: {time: false}}, axes: [{label: "step", incrs: STEPS}, {size: 60}], legend: {live: true}};
  }

  function mark(el, c) {
    // what a test (or a curious person) can read back: how many points each chart holds, the last step
    const counts = c.ys.map(function (ys) { return ys.filter(function (v) { return v !== null; }).length; });
    el.dataset.points = String(counts[0] || 0);
    el.dataset.series = counts.join(",");
    el.dataset.last = c.x.length ? String(c.x[c.x.length - 1]) : "";
  }

  function draw(el, data) {
    if (charts[el.id]) { charts[el.id].plot.destroy(); }
    el.textContent = "";
    if (!data.x.length) {
      el.textContent = "no metrics yet";
      el.dataset.points = "0";
      charts[el.id] = {plot: {destroy: function () {}}, el: el, x: [], ys: [], labels: []};
      return;
    }
    const c = {el: el, x: data.x.slice(), ys: data.series.map(function (s) { return s.values.slice(); }),
               labels: data.series.map(function (s) { return s.label; })};
    c.plot = new uPlot(options(el, data), [c.x].concat(c.ys), el);
    charts[el.id] = c;
    mark(el, c);
  }

  function load(el) {
    return getJSON(el.dataset.src).then(function (data) { draw(el, data); });
  }

  function extend(el) {
    const c = charts[el.id];
    if (!c || !c.x.length) { return load(el); }
    const after = c.x[c.x.length - 1];
    return getJSON(el.dataset.src + "?after=" + encodeURIComponent(after)).then(function (data) {
      if (!data.x.length) { return; }
      const same = data.series.length === c.labels.length &&
        data.series.every(function (s, i) { return s.label === c.labels[i]; });
      if (!same) { return load(el); }  // a new series (the first eval, a new sweep element): drawn again whole
      c.x = c.x.concat(data.x);
      c.ys = c.ys.map(function (ys, i) { return ys.concat(data.series[i].values); });
      c.plot.setData([c.x].concat(c.ys));
      mark(el, c);
    });
  }

  function chartsOnPage() {
    return Array.prototype.slice.call(document.querySelectorAll(".chart[data-src]"));
  }

  function live() {
    const body = document.body;
    const every = Math.max(1, Number(body.dataset.interval) || 10) * 1000;
    function tick() {
      const url = body.dataset.live;
      if (!url) { return; }
      if (document.hidden) { setTimeout(tick, every); return; }  // a tab in the background asks nothing
      getJSON(url).then(function (data) {
        Object.keys(data.sections || {}).forEach(function (id) {
          const old = document.getElementById(id);
          if (old) { old.outerHTML = data.sections[id]; }
        });
        return Promise.all(chartsOnPage().map(extend)).then(function () { return data; });
      }).then(function (data) {
        body.dataset.updated = String(Number(body.dataset.updated || 0) + 1);
        if (data.finished) { body.dataset.live = ""; body.dataset.finished = "1"; return; }
        setTimeout(tick, every);
      }).catch(function () { setTimeout(tick, every); });
    }
    if (body.dataset.live) { setTimeout(tick, every); }
  }

  function start() {
    document.documentElement.classList.add("js");
    Promise.all(chartsOnPage().map(function (el) {
      return load(el).catch(function (e) { el.textContent = "cannot draw: " + e.message; });
    })).then(function () { document.body.dataset.drawn = "1"; });
    live();
    window.addEventListener("resize", function () {
      Object.keys(charts).forEach(function (id) {
        const c = charts[id];
        if (c.plot.setSize) { c.plot.setSize({width: Math.max(320, c.el.clientWidth), height: 240}); }
      });
    });
  }

  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
