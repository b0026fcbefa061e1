'use strict';
// Time-series charts on uPlot: a titled figure, one series per label, colours from the theme's
// variables, width following the container, a bounded number of points.
(function charts() {
  const TG = (window.TG = window.TG || {});

  function palette() {
    const css = getComputedStyle(document.documentElement);
    return [0, 1, 2, 3, 4, 5].map((i) => css.getPropertyValue(`--s${i}`).trim() || '#888');
  }

  function themeColor(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  /**
   * `TG.chart(parent, { title, labels: [...], unit, maxPoints, min, max, colors })`: returns
   * `{ el, setData(xsSec, ...columns), append(tSec, values), points(), destroy() }`.
   */
  TG.chart = function chart(parent, { title, labels, unit = '', maxPoints = 600, min, max, colors, id }) {
    const fig = document.createElement('figure');
    fig.className = 'panel';
    fig.style.margin = '0';
    if (id) fig.id = id;
    const cap = document.createElement('figcaption');
    const h = document.createElement('h2');
    h.textContent = title;
    cap.appendChild(h);
    fig.appendChild(cap);
    const box = document.createElement('div');
    box.className = 'chart';
    box.setAttribute('role', 'img');
    box.setAttribute('aria-label', `${title}: live chart of ${labels.join(', ')}; the figures are in the tables of this page`);
    fig.appendChild(box);
    parent.appendChild(fig);

    // `colors`: CSS variable names (e.g. '--ok') or colours; the theme's series palette by default.
    const pal = colors ? colors.map((c) => (c.startsWith('--') ? themeColor(c) : c)) : palette();
    const axisStroke = themeColor('--muted');
    const grid = themeColor('--line');
    const data = [[], ...labels.map(() => [])];
    const fmt = (v) => (v === null || v === undefined ? '–' : `${Math.abs(v) >= 100 ? Math.round(v) : Math.round(v * 100) / 100}${unit}`);
    const opts = {
      width: Math.max(200, box.clientWidth || parent.clientWidth || 300),
      height: 200,
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true }, y: { range: (u, lo, hi) => [min !== undefined ? min : Math.min(0, lo), max !== undefined ? max : Math.max(hi, (min || 0) + 1)] } },
      axes: [
        { stroke: axisStroke, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid } },
        { stroke: axisStroke, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid }, size: 56, values: (u, vals) => vals.map(fmt) },
      ],
      series: [{}, ...labels.map((label, i) => ({ label, stroke: pal[i % pal.length], width: 2, value: (u, v) => fmt(v), points: { show: false } }))],
    };
    const plot = new window.uPlot(opts, data, box);
    fig.tgChart = () => data; // what is drawn, for tests and the console
    const ro = new ResizeObserver(() => {
      const w = box.clientWidth;
      if (w > 0 && Math.abs(w - plot.width) > 1) plot.setSize({ width: w, height: 200 });
    });
    ro.observe(box);

    function trim() {
      const extra = data[0].length - maxPoints;
      if (extra > 0) for (const col of data) col.splice(0, extra);
    }
    return {
      el: fig,
      setData(xs, ...cols) {
        data[0] = xs.slice();
        cols.forEach((c, i) => { data[i + 1] = c.slice(); });
        trim();
        plot.setData(data);
      },
      append(t, values, redraw = true) {
        data[0].push(t);
        values.forEach((v, i) => data[i + 1].push(v));
        trim();
        if (redraw) plot.setData(data);
      },
      redraw() {
        plot.setData(data);
      },
      points() {
        return data[0].length;
      },
      destroy() {
        ro.disconnect();
        plot.destroy();
        fig.remove();
      },
    };
  };
})();
