// Chart.js (vendored from npm, loaded as the global `Chart` by index.html) behind one small
// panel class: a titled card with a canvas, axes titled with their units, a legend that can
// group many lines under one entry (one line per run, one entry per activation rate), and an
// honest draw counter: after every draw the card's data-points attribute holds the number of
// points actually drawn (data-series and data-series-labels the datasets), which the browser
// tests and anyone inspecting the page can read.
import {h} from './format.js';

const ChartJs = window.Chart;

ChartJs.defaults.animation = false;
ChartJs.defaults.font.family =
    'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif';
ChartJs.defaults.font.size = 12;
ChartJs.defaults.color = '#334155';
ChartJs.defaults.borderColor = '#e2e8f0';

ChartJs.register({
  id: 'parityDrawCounter',
  afterDraw(chart) {
    const card = chart.canvas.closest('[data-chart]');
    if (!card) return;
    let points = 0;
    const labels = [];
    chart.data.datasets.forEach((dataset, index) => {
      labels.push(dataset.label);
      if (!chart.isDatasetVisible(index)) return;
      // Elements of null values are kept by Chart.js but skipped when drawing.
      points += chart.getDatasetMeta(index).data.filter((element) => !element.skip).length;
    });
    card.dataset.points = String(points);
    card.dataset.series = String(chart.data.datasets.length);
    card.dataset.seriesLabels = JSON.stringify(labels);
    card.dataset.draws = String(Number(card.dataset.draws || 0) + 1);
  },
});

// Legend entries are drawn samples, 28 px wide (labels.pointStyleWidth): a line's is a stretch of
// the line with its colour and dash, so a dashed line's entry is dashed; a point's is its dot,
// centred (Chart.js would stretch a circle to the entry's width). Cached per look.
const SAMPLE_WIDTH = 28;
const samples = new Map();
function sample(key, draw) {
  if (!samples.has(key)) {
    const canvas = document.createElement('canvas');
    canvas.width = SAMPLE_WIDTH;
    canvas.height = 10;
    canvas.dataset.sample = key.split('|')[0];
    draw(canvas.getContext('2d'));
    samples.set(key, canvas);
  }
  return samples.get(key);
}
function lineSample(colour, dash) {
  return sample(`line|${colour}|${(dash || []).join(',')}`, (ctx) => {
    ctx.strokeStyle = colour;
    ctx.lineWidth = 2;
    ctx.setLineDash(dash || []);
    ctx.beginPath();
    ctx.moveTo(0, 5);
    ctx.lineTo(SAMPLE_WIDTH, 5);
    ctx.stroke();
  });
}
function dotSample(fill, stroke) {
  return sample(`dot|${fill}|${stroke}`, (ctx) => {
    ctx.fillStyle = fill;
    ctx.strokeStyle = stroke;
    ctx.beginPath();
    ctx.arc(SAMPLE_WIDTH / 2, 5, 4, 0, 2 * Math.PI);
    ctx.fill();
    ctx.stroke();
  });
}

// Ticks of a log axis at round values, so that r_a reads 10%, 15%, 20%, 30%, 50%, 100%: denser
// within a decade, 1-2-5 across several.
function logTicks(axis) {
  const ticks = [];
  const decades = Math.log10(axis.max / axis.min);
  const mantissas = decades <= 1.2 ? [1, 1.5, 2, 3, 4, 5, 6, 8] : [1, 2, 5];
  for (let exponent = Math.floor(Math.log10(axis.min)); exponent <= Math.ceil(Math.log10(axis.max));
       exponent++) {
    for (const mantissa of mantissas) {
      const value = mantissa * 10 ** exponent;
      if (value >= axis.min * 0.999 && value <= axis.max * 1.001) ticks.push({value});
    }
  }
  if (ticks.length >= 2) axis.ticks = ticks;
}

function axis({title, type = 'linear', format = null, beginAtZero = false, min, max}) {
  return {
    type,
    min,
    max,
    beginAtZero,
    title: {display: Boolean(title), text: title, font: {weight: '600'}},
    ticks: {maxTicksLimit: 8, callback: format ? (value) => format(value) : undefined},
    afterBuildTicks: type === 'logarithmic' ? logTicks : undefined,
  };
}

export class ChartPanel {
  // options: {title, subtitle, testId, type ('line'|'bar'|'scatter'), x: axis options,
  //           y: axis options, groupLegend (one legend entry per dataset.group), emptyText,
  //           tooltipTitle(x), tooltipLabel(dataset, y), wide}
  constructor(parent, options) {
    this.options = options;
    this.hiddenGroups = new Set();
    this.canvas = h('canvas', {role: 'img', 'aria-label': options.title});
    this.empty = h('p', {class: 'chart-empty', hidden: true}, options.emptyText || 'No data yet.');
    this.card = h('figure', {class: `chart-card${options.wide ? ' wide' : ''}`,
                             'data-chart': options.testId, 'data-testid': options.testId,
                             'data-points': '0'},
                  h('figcaption', {}, h('span', {class: 'chart-title'}, options.title),
                    options.subtitle ? h('span', {class: 'chart-subtitle'}, options.subtitle) : null),
                  h('div', {class: 'chart-box'}, this.canvas, this.empty));
    parent.append(this.card);
    this.chart = new ChartJs(this.canvas, this.config());
  }

  config() {
    const o = this.options;
    const panel = this;
    const legend = {
      position: 'bottom',
      labels: {usePointStyle: true, boxWidth: 8, boxHeight: 8, padding: 12, pointStyleWidth: SAMPLE_WIDTH},
    };
    // Chart.js takes a point-style entry's look from the dataset's first point, which has no
    // dash: a dashed line's entry is given its line's dash here, so it is drawn as it is drawn.
    legend.labels.generateLabels = (chart) => {
      const items = ChartJs.defaults.plugins.legend.labels.generateLabels(chart);
      for (const item of items) {
        const dataset = chart.data.datasets[item.datasetIndex];
        if (dataset?.borderDash?.length) item.lineDash = dataset.borderDash;
        if (dataset?.pointStyle === 'line') item.pointStyle = lineSample(dataset.borderColor, item.lineDash);
        else if ((item.pointStyle ?? 'circle') === 'circle') item.pointStyle = dotSample(item.fillStyle, item.strokeStyle);
      }
      return items;
    };
    if (o.groupLegend) {
      legend.labels.generateLabels = (chart) => {
        const seen = new Map();
        chart.data.datasets.forEach((dataset, index) => {
          const group = dataset.group ?? dataset.label;
          if (seen.has(group)) return;
          seen.set(group, {
            text: group,
            fillStyle: dataset.borderColor,
            strokeStyle: dataset.borderColor,
            lineDash: dataset.borderDash,
            lineWidth: 2,
            pointStyle: lineSample(dataset.borderColor, dataset.borderDash),
            hidden: panel.hiddenGroups.has(group),
            datasetIndex: index,
          });
        });
        return [...seen.values()];
      };
      legend.onClick = (event, item) => panel.toggleGroup(item.text);
    }
    return {
      type: o.type || 'line',
      data: {datasets: []},
      options: {
        responsive: true,
        maintainAspectRatio: false,
        parsing: true,
        normalized: true,
        spanGaps: true,
        interaction: {mode: o.interaction || 'nearest', intersect: false, axis: 'x'},
        scales: {x: axis(o.x || {}), y: axis(o.y || {})},
        elements: {line: {borderWidth: 1.6, tension: 0}, point: {radius: 0, hitRadius: 6}},
        plugins: {
          legend,
          tooltip: {
            callbacks: {
              title: (items) => (items.length && o.tooltipTitle ? o.tooltipTitle(items[0].parsed.x) : undefined),
              label: (item) => (o.tooltipLabel ? o.tooltipLabel(item.dataset, item.parsed.y, item.parsed.x)
                                               : `${item.dataset.label}: ${item.formattedValue}`),
            },
          },
        },
      },
    };
  }

  toggleGroup(group) {
    if (this.hiddenGroups.has(group)) this.hiddenGroups.delete(group);
    else this.hiddenGroups.add(group);
    this.applyHidden();
    this.chart.update('none');
  }

  applyHidden() {
    for (const dataset of this.chart.data.datasets) {
      dataset.hidden = this.hiddenGroups.has(dataset.group ?? dataset.label);
    }
  }

  // Replaces the datasets (the API's documents are re-read whole on every poll).
  update(datasets, {labels} = {}) {
    this.chart.data.datasets = datasets;
    if (labels) this.chart.data.labels = labels;
    this.applyHidden();
    const total = datasets.reduce((sum, dataset) => sum + dataset.data.length, 0);
    this.empty.hidden = total > 0;
    this.card.classList.toggle('is-empty', total === 0);
    // Without data Chart.js would invent a 0–1 range and print ticks like "0 0 0 1 1 1": an
    // empty chart shows its message alone.
    for (const scale of Object.values(this.chart.options.scales)) scale.display = total > 0;
    this.chart.update('none');
  }

  // The message an empty chart shows (it depends on whether anything may still arrive).
  setEmptyText(text) {
    this.empty.textContent = text;
  }

  destroy() {
    this.chart.destroy();
  }
}
