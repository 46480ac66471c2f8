// gputune dashboard. Plain JavaScript, no network beyond this server. Every string from the
// database is inserted with textContent (never innerHTML), so kernel names and logs stay text.
'use strict';

const params = new URLSearchParams(location.search);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k === 'style') e.style.cssText = v;  // CSSOM: allowed by the page's CSP
    else if (k === 'href') e.setAttribute('href', v);
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
  return e;
}

async function api(path) {
  const r = await fetch(path, {cache: 'no-store'});
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || ('HTTP ' + r.status));
  return body;
}

// `digits` significant digits, trailing zeros kept so that a column's digits line up, never in
// exponent notation: 5.60, 24.6, 1,234.
function sig(v, digits) {
  return v.toLocaleString('en-US', {minimumSignificantDigits: digits, maximumSignificantDigits: digits});
}

function fmt(v, digits) {
  if (v === null || v === undefined) return '-';
  if (typeof v === 'number') return Number.isInteger(v) ? String(v) : sig(v, digits || 4);
  return String(v);
}

// A quantity in the SI prefix that keeps it between 1 and 1000, with its unit: 24,580 GFLOP/s is
// "24.6 TFLOP/s", 36.01 GB/s "36.0 GB/s". Rounded first, so 999.96 GB/s is "1.00 TB/s".
const prefixes = [[1e18, 'E'], [1e15, 'P'], [1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e3, 'k'], [1, '']];
function withPrefix(v, unit, digits) {
  if (v === null || v === undefined || !Number.isFinite(v)) return '-';
  if (v === 0) return '0 ' + unit;
  const r = Number(Math.abs(v).toPrecision(digits || 3));
  const [scale, p] = prefixes.find(([s]) => r >= s) || prefixes[prefixes.length - 1];
  return (v < 0 ? '-' : '') + sig(r / scale, digits || 3) + ' ' + p + unit;
}
function fmtFlops(gflops) { return gflops == null ? '-' : withPrefix(gflops * 1e9, 'FLOP/s'); }
function fmtBandwidth(gbps) { return gbps == null ? '-' : withPrefix(gbps * 1e9, 'B/s'); }
// A time given in ms, 4 significant digits, in s, ms, µs or ns: "85.46 ms", "5.591 ms", "512.0 µs".
function fmtTime(ms, digits) {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '-';
  if (ms === 0) return '0 ms';
  const d = digits || 4;
  const r = Number(Math.abs(ms).toPrecision(d));
  const [scale, unit] = r >= 1000 ? [1e3, 's'] : r >= 1 ? [1, 'ms'] : r >= 1e-3 ? [1e-3, '\u00b5s'] : [1e-6, 'ns'];
  return (ms < 0 ? '-' : '') + sig(r / scale, d) + ' ' + unit;
}
function fmtBytes(bytes) {  // binary prefixes, as memory sizes are given
  if (bytes == null) return '-';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (i < units.length - 1 && bytes >= 1024 ** (i + 1)) ++i;
  return sig(bytes / 1024 ** i, 3) + ' ' + units[i];
}
function fmtSpeedup(x) { return x ? sig(x, 3) + 'x' : '-'; }
function fmtPercent(f) { return f == null ? '-' : Math.round(f * 100) + '%'; }

// A configuration as `name=value` pairs separated by spaces, so a long one wraps in its cell.
function config(c) { return c ? Object.entries(c).map(([k, v]) => k + '=' + v).join(' ') : '-'; }

function section(title, ...content) { return el('section', {}, el('h2', {}, title), ...content); }

// A table whose rows sort in the browser when a header is clicked. columns: [{title, value(row),
// render(row) -> node|string, num}]
function sortableTable(id, columns, rows) {
  const table = el('table', {id});
  const thead = el('thead');
  const tbody = el('tbody');
  let sortCol = -1, asc = true;
  function fill() {
    tbody.textContent = '';
    for (const r of rows) {
      const tr = el('tr');
      for (const c of columns) {
        const content = c.render ? c.render(r) : fmt(c.value(r));
        tr.appendChild(el('td', {class: (c.num ? 'num ' : '') + (c.cls ? c.cls(r) : '')}, content));
      }
      tbody.appendChild(tr);
    }
    if (!rows.length) tbody.appendChild(el('tr', {}, el('td', {colspan: columns.length, class: 'muted'}, 'none')));
  }
  const tr = el('tr');
  columns.forEach((c, i) => {
    const th = el('th', {class: c.num ? 'num' : '', onclick: () => {
      asc = sortCol === i ? !asc : true;
      sortCol = i;
      rows.sort((a, b) => {
        const x = c.value(a), y = c.value(b);
        if (x === y) return 0;
        if (x === null || x === undefined) return 1;
        if (y === null || y === undefined) return -1;
        return (x < y ? -1 : 1) * (asc ? 1 : -1);
      });
      for (const h of thead.querySelectorAll('th')) h.classList.remove('sorted-asc', 'sorted-desc');
      th.classList.add(asc ? 'sorted-asc' : 'sorted-desc');
      fill();
    }}, c.title);
    tr.appendChild(th);
  });
  thead.appendChild(tr);
  table.append(thead, tbody);
  fill();
  return table;
}

function link(href, text) { return el('a', {href}, text); }
function runLink(id) { return id ? link('/run.html?id=' + encodeURIComponent(id), '#' + id) : '-'; }
function statusCell(s) { return el('span', {class: 'status-' + s}, s); }

async function overview(main) {
  const [devices, queue, runs, winners, kernels] = await Promise.all([
    api('/api/devices'), api('/api/queue?limit=20'), api('/api/runs?limit=20'), api('/api/winners?limit=20'),
    api('/api/kernels')]);
  main.textContent = '';
  main.append(
    section('Devices', sortableTable('devices', [
      {title: 'name', value: d => d.name}, {title: 'compute capability', value: d => d.compute_capability},
      {title: 'SMs', value: d => d.sm_count, num: true},
      {title: 'memory', value: d => d.total_mem, render: d => fmtBytes(d.total_mem), num: true},
      {title: 'source', value: d => d.source}, {title: 'contexts', value: d => d.contexts, num: true}], devices)),
    section('Queue', sortableTable('queue', [
      {title: 'job', value: q => q.id, num: true}, {title: 'name', value: q => q.name},
      {title: 'status', value: q => q.status, render: q => statusCell(q.status)},
      {title: 'worker', value: q => q.worker}, {title: 'run', value: q => q.run_id, render: q => runLink(q.run_id)},
      {title: 'submitted', value: q => q.submitted_at}, {title: 'message', value: q => q.message}], queue)),
    section('Recent runs', sortableTable('runs', [
      {title: 'run', value: r => r.id, render: r => runLink(r.id), num: true}, {title: 'job', value: r => r.job},
      {title: 'status', value: r => r.status, render: r => statusCell(r.status)},
      {title: 'progress', value: r => r.done, render: r => r.done + '/' + r.total, num: true},
      {title: 'best time', value: r => r.best_ms, render: r => fmtTime(r.best_ms), num: true},
      {title: 'started', value: r => r.started_at}], runs)),
    section('Latest winners', sortableTable('winners', [
      {title: 'kernel', value: w => w.kernel, render: w => link('/kernel.html?id=' + w.kernel_id, w.kernel)},
      {title: 'context', value: w => w.context, render: w => link('/history.html?context=' + w.context_id, w.context)},
      {title: 'device', value: w => w.device}, {title: 'time', value: w => w.time_ms, render: w => fmtTime(w.time_ms), num: true},
      {title: 'configuration', value: w => config(w.configuration)}, {title: 'run', value: w => w.run_id, render: w => runLink(w.run_id)}],
      winners)),
    section('Kernels', sortableTable('kernels', [
      {title: 'kernel', value: k => k.name, render: k => link('/kernel.html?id=' + k.id, k.name)},
      {title: 'hash', value: k => k.hash, render: k => el('code', {}, k.hash.slice(0, 12))},
      {title: 'contexts', value: k => k.contexts, num: true}, {title: 'variants', value: k => k.variants, num: true},
      {title: 'winners', value: k => k.winners, num: true}], kernels)));
}

async function kernelPage(main) {
  const k = await api('/api/kernels/' + encodeURIComponent(params.get('id') || ''));
  document.getElementById('crumb').textContent = 'kernel ' + k.name;
  main.textContent = '';
  const tuned = k.contexts.some(c => c.time_ms != null);
  // A naive kernel's winners are generated variants: the header's #defines do not make them of
  // its source, and each one's source is had with the command shown.
  const generated = k.contexts.filter(c => c.source_command);
  const asWritten = k.contexts.filter(c => c.naive_fallback);
  const sources = generated.length || asWritten.length ? el('div', {id: 'winner-sources'},
    generated.length ? el('p', {}, 'A naive kernel: its winners are generated variants, which the header\'s #defines do not make of its source. Each winner\'s source:') : null,
    generated.length ? el('ul', {}, ...generated.map(c => el('li', {}, c.context + ' on ' + c.device + ': ', el('code', {}, c.source_command)))) : null,
    ...asWritten.map(c => el('p', {}, c.context + ' on ' + c.device + ': the naive kernel as written, launched at the winner\'s block shape (tuned over block shape only: ' + c.naive_fallback + ')'))) : null;
  main.append(section('Kernel ' + k.name, el('p', {class: 'muted'}, 'source hash ' + k.hash),
    tuned ? el('p', {}, el('a', {id: 'header-link', href: '/api/kernels/' + k.id + '/header'}, 'Download the winners as a C/C++ header'),
      el('span', {class: 'muted'}, ' (compile with -DGPUTUNE_TARGET_<device> -DGPUTUNE_CONTEXT_<context>)')) : null,
    sortableTable('contexts', [
      {title: 'context', value: c => c.context, render: c => link('/history.html?context=' + c.context_id, c.context)},
      {title: 'device', value: c => c.device}, {title: 'arch', value: c => c.arch},
      {title: 'winner', value: c => c.time_ms, render: c => fmtTime(c.time_ms), num: true},
      {title: 'default', value: c => c.default_ms, render: c => fmtTime(c.default_ms), num: true},
      {title: 'speedup', value: c => c.speedup, render: c => fmtSpeedup(c.speedup), num: true},
      {title: 'throughput', value: c => c.gflops, render: c => fmtFlops(c.gflops), num: true},
      {title: 'bandwidth', value: c => c.gbps, render: c => fmtBandwidth(c.gbps), num: true},
      {title: 'configuration', value: c => config(c.configuration)},
      {title: 'run', value: c => c.run_id, render: c => runLink(c.run_id)}], k.contexts), sources),
    tuned ? selectForm(k) : null);
}

// Runtime selection for a device and problem size (GET /api/kernels/{id}/select): the answer
// `gputune best --size` gives, and how it was obtained (measured, or predicted from which contexts).
function selectForm(k) {
  const archOf = {};
  for (const c of k.contexts) if (c.device && !(c.device in archOf)) archOf[c.device] = c.arch || '';
  const device = el('select', {id: 'select-device'}, ...Object.keys(archOf).map(d => el('option', {value: d}, d + (archOf[d] ? ' (' + archOf[d] + ')' : ''))));
  const size = el('input', {id: 'select-size', placeholder: 'problem size, e.g. 2048,2048', size: '24'});
  const answer = el('div', {id: 'select-answer'});
  if (!params.get('size')) api('/api/contexts?kernel=' + encodeURIComponent(k.name)).then(cs => {
    const c = cs.find(c => Array.isArray(c.problem_size) && c.problem_size.every(Number.isInteger));
    if (c && !size.value) size.value = c.problem_size.join(',');
  }).catch(() => {});
  const ask = async () => {
    answer.textContent = '';
    const q = '?device=' + encodeURIComponent(device.value) + '&arch=' + encodeURIComponent(archOf[device.value] || '') +
      '&size=' + encodeURIComponent(size.value.trim());
    try {
      const c = await api('/api/kernels/' + k.id + '/select' + q);
      answer.append(
        el('p', {}, el('strong', {id: 'select-how'}, c.how), ' on ' + c.device + ': ', el('code', {id: 'select-config'}, c.params.map(p => p.name + '=' + p.value).join(' ')),
          el('span', {class: 'muted'}, ' (configuration ' + c.config + '; grid ' + c.grid.join('x') + ', block ' + c.block.join('x') + ')')),
        el('p', {id: 'select-from'}, (c.how === 'measured' ? 'Measured in context ' : 'Predicted from ') + c.from.join(', ') + '.'),
        el('p', {id: 'select-explain', class: 'muted'}, c.explain));
    } catch (e) {
      answer.append(el('p', {class: 'error', id: 'select-error'}, e.message));
    }
  };
  size.addEventListener('keydown', e => { if (e.key === 'Enter') ask(); });
  // kernel.html?id=ID&device=NAME&size=2048,2048 asks at once (a link to an answer).
  if (params.get('size')) {
    size.value = params.get('size');
    if (params.get('device') in archOf) device.value = params.get('device');
    ask();
  }
  return section('Choose a configuration at run time',
    el('p', {class: 'muted'}, 'The rules of gputune::select (and `gputune best --size`): the measured winner where this device and size were tuned, else a prediction from the tuned contexts.'),
    el('div', {class: 'controls'}, device, size, el('button', {id: 'select-go', onclick: ask}, 'Choose')), answer);
}

const runState = {sort: 'time_ms', order: 'asc', offset: 0, limit: 50, status: '', q: ''};

async function runPage(main) {
  const id = params.get('id') || '';
  const run = await api('/api/runs/' + encodeURIComponent(id));
  document.getElementById('crumb').textContent = 'run #' + run.id;
  main.textContent = '';
  const pct = run.total ? Math.min(100, Math.round(100 * run.done / run.total)) : 0;
  const counts = Object.entries(run.counts).map(([s, n]) => s + ': ' + n).join(', ');
  const stamp = Date.now();
  main.append(
    section('Run #' + run.id + ': ' + run.job,
      el('p', {}, statusCell(run.status), ' ', el('span', {class: 'progress'}, el('div', {style: 'width:' + pct + '%'})),
         ' ' + run.done + '/' + run.total + ' (' + pct + '%)',
         run.budget != null ? ', budget ' + run.budget + ' configurations' : '',
         run.seconds_spent != null ? ', ' + fmtTime(run.seconds_spent * 1000, 3) + ' measuring' : ''),
      el('p', {id: 'counts'}, counts || 'no measurements yet'),
      bestTimes(run),
      run.model_search ? el('p', {id: 'model-search'}, 'plan: ' + run.model_search) : null,
      run.naive_fallback ? el('p', {id: 'naive-fallback'}, 'block shape only: ' + run.naive_fallback +
        ' (the naive kernel is outside the generator\'s subset; its variants are the kernel as written, launched at each block shape)') : null,
      el('p', {class: 'muted'}, run.message),
      run.notes ? el('ul', {id: 'run-notes'}, ...run.notes.split('\n').filter(n => n).map(n => el('li', {}, 'note: ' + n))) : null,
      run.kernel_id ? el('p', {}, link('/kernel.html?id=' + run.kernel_id, 'kernel ' + run.kernel)) : null,
      t4Links(run)),
    section('Charts', el('div', {class: 'charts'},
      el('img', {src: '/api/runs/' + run.id + '/best.svg?t=' + stamp, alt: 'best so far'}),
      el('img', {src: '/api/runs/' + run.id + '/scatter.svg?t=' + stamp, alt: 'measured vs predicted'}),
      el('img', {src: '/api/runs/' + run.id + '/parameters.svg?t=' + stamp, alt: 'parameter effects'}))),
    section('Variants', measurementControls(run), el('div', {id: 'measurements'})));
  await loadMeasurements(run);
  if (run.status === 'running') setTimeout(() => runPage(main).catch(showError), 2000);
}

// Each timed context's best time so far.
function bestTimes(run) {
  const timed = (run.contexts || []).filter(c => c.best_ms != null);
  return timed.length ? el('p', {id: 'best-times'}, 'best: ' + timed.map(c => c.label + ' ' + fmtTime(c.best_ms)).join(', ')) : null;
}

// The run's timed contexts (one kernel on one device), each as a T4 results file: a T4 file
// holds one tuning problem.
function t4Links(run) {
  const timed = (run.contexts || []).filter(c => c.best_ms != null);
  if (!timed.length) return null;
  return el('p', {id: 't4-links'}, 'T4 results: ', ...timed.flatMap((c, i) => {
    const a = el('a', {href: '/api/runs/' + run.id + '/t4?' + new URLSearchParams({context: c.label}), download: ''}, c.label);
    return i ? [', ', a] : [a];
  }));
}

function measurementControls(run) {
  const status = el('select', {id: 'status-filter', onchange: e => { runState.status = e.target.value; runState.offset = 0; loadMeasurements(run); }},
    ...['', 'correct', 'compile', 'runtime', 'correctness', 'timeout', 'constraints', 'compiled'].map(s => {
      const o = el('option', {value: s}, s || 'any status');
      if (s === runState.status) o.selected = true;
      return o;
    }));
  const search = el('input', {id: 'search', placeholder: 'configuration contains...', value: runState.q});
  search.addEventListener('change', e => { runState.q = e.target.value; runState.offset = 0; loadMeasurements(run); });
  return el('div', {class: 'controls'}, status, search,
    el('button', {id: 'prev', onclick: () => { runState.offset = Math.max(0, runState.offset - runState.limit); loadMeasurements(run); }}, '< prev'),
    el('button', {id: 'next', onclick: () => { runState.offset += runState.limit; loadMeasurements(run); }}, 'next >'),
    el('span', {id: 'page-info', class: 'muted'}));
}

async function loadMeasurements(run) {
  const q = new URLSearchParams({sort: runState.sort, order: runState.order, offset: runState.offset, limit: runState.limit});
  if (runState.status) q.set('status', runState.status);
  if (runState.q) q.set('q', runState.q);
  const page = await api('/api/runs/' + run.id + '/measurements?' + q);
  // [title, server sort key, render, numeric (right-aligned, units in the cell)]
  const columns = [
    ['context', null, m => m.context], ['status', 'status', m => statusCell(m.status)],
    ['time', 'time_ms', m => fmtTime(m.time_ms), true], ['throughput', null, m => fmtFlops(m.gflops), true],
    ['bandwidth', null, m => fmtBandwidth(m.gbps), true],
    ['regs', 'registers', m => fmt(m.registers), true], ['occupancy', 'occupancy', m => fmtPercent(m.occupancy), true],
    ['predicted', null, m => fmtTime(m.predicted_ms), true], ['configuration', null, m => el('code', {}, config(m.configuration))],
    ['reason', null, m => m.reason]];
  const table = el('table', {id: 'variants'});
  const head = el('tr');
  for (const [title, key, , num] of columns) {
    const cls = (num ? 'num ' : '') + (key === runState.sort ? (runState.order === 'asc' ? 'sorted-asc' : 'sorted-desc') : '');
    head.appendChild(el('th', {class: cls, 'data-sort': key || '', onclick: () => {
      if (!key) return;
      runState.order = runState.sort === key && runState.order === 'asc' ? 'desc' : 'asc';
      runState.sort = key;
      runState.offset = 0;
      loadMeasurements(run);
    }}, title));
  }
  const body = el('tbody');
  for (const m of page.items) {
    const tr = el('tr');
    for (const [, , render, num] of columns) tr.appendChild(el('td', {class: num ? 'num' : ''}, render(m)));
    body.appendChild(tr);
  }
  table.append(el('thead', {}, head), body);
  const holder = document.getElementById('measurements');
  holder.textContent = '';
  holder.appendChild(table);
  document.getElementById('page-info').textContent =
    page.total ? (page.offset + 1) + '-' + Math.min(page.total, page.offset + page.items.length) + ' of ' + page.total : 'no variants';
  document.getElementById('next').disabled = page.offset + page.items.length >= page.total;
  document.getElementById('prev').disabled = page.offset === 0;
}

async function historyPage(main) {
  const id = params.get('context') || '';
  const h = await api('/api/contexts/' + encodeURIComponent(id) + '/history');
  document.getElementById('crumb').textContent = 'history of ' + h.kernel + ' ' + h.context;
  main.textContent = '';
  main.append(section('Winning time across runs: ' + h.kernel + ', ' + h.context + ', ' + h.device,
    el('div', {class: 'charts'}, el('img', {src: '/api/contexts/' + encodeURIComponent(id) + '/history.svg', alt: 'history'})),
    sortableTable('history', [
      {title: 'run', value: r => r.run_id, render: r => runLink(r.run_id), num: true},
      {title: 'started', value: r => r.started_at}, {title: 'best time', value: r => r.best_ms, render: r => fmtTime(r.best_ms), num: true},
      {title: 'status', value: r => r.status, render: r => statusCell(r.status)}], h.runs)));
}

function showError(e) {
  const main = document.getElementById('main');
  main.textContent = '';
  main.appendChild(el('p', {class: 'error', id: 'error'}, 'Error: ' + e.message));
}

// One HTML shell serves every page; the path picks what to draw.
const pages = {'/kernel.html': [kernelPage, 'Kernel'], '/run.html': [runPage, 'Run'],
               '/history.html': [historyPage, 'History']};
const [page, title] = pages[location.pathname] || [overview, 'Overview'];
document.title = 'gputune: ' + title;
page(document.getElementById('main'))
  .then(() => {
    window.gputuneLoadedMs = performance.now();  // for the page-load benchmark
    document.body.setAttribute('data-loaded', '1');
  })
  .catch(showError);
