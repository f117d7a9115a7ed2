// Hostplane console: a single page over the public API. No framework: hash routes
// (#/ the fleet, #/clusters/<name> one cluster), fetch with the bearer token, and the
// event stream read with fetch + ReadableStream (EventSource cannot send headers).
'use strict';

const TOKEN_KEY = 'hostplane.token';
const POLL_MS = 2000;
const $ = (sel, root) => (root || document).querySelector(sel);
const $$ = (sel, root) => Array.from((root || document).querySelectorAll(sel));

const app = {
  config: {},       // /ui/config.json: {grafanaURL}
  releases: [],     // GET /v1/releases items
  view: null,       // {name, stop()} of the page shown
};

// ---- API ----------------------------------------------------------------

class APIError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || ('HTTP ' + status));
    this.status = status;
    this.problem = problem || {};
  }
}

function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }

// api sends one request to the API; it resolves to the decoded JSON answer (or the Response
// when raw) and rejects with an APIError carrying the problem+json answer.
async function api(method, path, body, opts) {
  opts = opts || {};
  const headers = { 'Authorization': 'Bearer ' + token(), 'Accept': opts.accept || 'application/json' };
  const init = { method, headers, signal: opts.signal, cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = method === 'PATCH' ? 'application/merge-patch+json' : 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  if (res.status === 401) {
    signOut('The token was refused: sign in again.');
    throw new APIError(401, { detail: 'not signed in' });
  }
  if (!res.ok) {
    let problem = null;
    try { problem = await res.json(); } catch (e) { problem = null; }
    throw new APIError(res.status, problem);
  }
  if (opts.raw) return res;
  if (res.status === 204) return null;
  const text = await res.text();
  return text ? JSON.parse(text) : null;
}

// ---- helpers ------------------------------------------------------------

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function condition(conds, type) { return (conds || []).find(c => c.type === type); }

// Conditions whose "good" status is False.
const NEGATIVE = new Set(['Degraded', 'Progressing', 'Deleting', 'UpdatingVersion', 'UpdatingConfig']);

// Conditions that only say whether a feature is on: False is neither good nor bad.
const FEATURE = new Set(['AutoscalingEnabled', 'AutorepairEnabled']);

// tone is a condition's colour: ok, warn (a negative condition that holds), bad or unknown.
function tone(c) {
  if (!c || c.status === 'Unknown') return 'unknown';
  const good = NEGATIVE.has(c.type) ? c.status === 'False' : c.status === 'True';
  if (good) return 'ok';
  if (FEATURE.has(c.type)) return 'unknown';
  return NEGATIVE.has(c.type) ? 'warn' : 'bad';
}

// badge shows one condition's status, labelled with label or the status.
function badge(c, label) {
  const status = c ? c.status : 'Unknown';
  return el('span', { class: 'badge ' + tone(c), title: c ? [c.reason, c.message].filter(Boolean).join(': ') : 'not reported yet',
    'data-type': label, 'data-status': status }, label ? label : status);
}

function conditionBadges(conds) {
  return el('span', { class: 'conds' }, (conds || []).map(c =>
    el('span', { class: 'badge ' + tone(c), title: [c.status, c.reason, c.message].filter(Boolean).join(': '),
      'data-type': c.type, 'data-status': c.status }, c.type)));
}

function ago(t) {
  if (!t) return '';
  const s = Math.round((Date.now() - Date.parse(t)) / 1000);
  return duration(Math.abs(s)) + (s >= 0 ? ' ago' : ' from now');
}

function duration(s) {
  if (s < 120) return s + 's';
  if (s < 7200) return Math.round(s / 60) + 'm';
  if (s < 172800) return Math.round(s / 3600) + 'h';
  return Math.round(s / 86400) + 'd';
}

function endpoint(c) {
  const e = c.status && c.status.controlPlaneEndpoint;
  return e && e.host ? e.host + ':' + e.port : '';
}

function version(c) {
  const v = c.status && c.status.version;
  const history = (v && v.history) || [];
  const done = history.find(h => h.state === 'Completed');
  const want = c.spec.release.version;
  const have = done ? done.version : '';
  if (!have) return want;
  return have === want ? have : have + ' \u2192 ' + want;
}

function setRows(table, rows, emptyNote) {
  const tbody = $('tbody', table);
  tbody.replaceChildren(...rows);
  if (emptyNote) emptyNote.hidden = rows.length > 0;
}

function grafanaLink(uid, label, vars) {
  if (!app.config.grafanaURL) return null;
  const u = new URL(app.config.grafanaURL + '/d/' + uid);
  for (const [k, v] of Object.entries(vars || {})) u.searchParams.set('var-' + k, v);
  return el('a', { href: u.toString(), target: '_blank', rel: 'noopener noreferrer', class: 'grafana' }, label);
}

// ---- forms and the API's field errors -----------------------------------

function clearErrors(form) {
  $$('.field-error, .form-error', form).forEach(p => { p.textContent = ''; });
  $$('[aria-invalid]', form).forEach(i => i.removeAttribute('aria-invalid'));
}

// showError puts each of the problem's field errors next to the input whose data-field names
// that field (or the closest enclosing field), and the rest in the form's error line.
function showError(form, err) {
  clearErrors(form);
  const problem = (err && err.problem) || {};
  const rest = [];
  for (const fe of problem.errors || []) {
    let path = fe.field || '';
    let slot = null;
    while (path && !slot) {
      slot = $('[data-error-for="' + CSS.escape(path) + '"]', form);
      if (!slot) path = path.includes('.') ? path.slice(0, path.lastIndexOf('.')) : '';
    }
    if (slot) {
      slot.textContent = (slot.textContent ? slot.textContent + '; ' : '') + fe.field + ': ' + fe.detail;
      const input = $('[data-field="' + CSS.escape(path) + '"]', form);
      if (input) input.setAttribute('aria-invalid', 'true');
    } else {
      rest.push(fe.field + ': ' + fe.detail);
    }
  }
  // The problem's detail ("the request has invalid fields") says nothing more when every
  // field error is shown at its field.
  const placed = (problem.errors || []).length - rest.length;
  const line = $(':scope > .form-error', form);
  if (line) line.textContent = (placed > 0 ? rest : [err.message].concat(rest)).join(' \u2014 ');
}

function onSubmit(form, fn) {
  form.addEventListener('submit', async ev => {
    ev.preventDefault();
    clearErrors(form);
    const button = $('button[type=submit]', form);
    if (button) button.disabled = true;
    try {
      await fn(form);
    } catch (err) {
      if (!(err instanceof APIError) || err.status !== 401) showError(form, err);
    } finally {
      if (button) button.disabled = false;
    }
  });
}

async function loadReleases() {
  try {
    app.releases = (await api('GET', '/v1/releases')).items || [];
  } catch (err) {
    app.releases = [];
  }
  for (const sel of $$('select.releases')) {
    const keep = sel.value;
    sel.replaceChildren(...app.releases.map(r => el('option', { value: r.version, selected: keep ? r.version === keep : r.default },
      r.version + (r.default ? ' (default)' : '') + (r.state && r.state !== 'Available' ? ' \u2014 ' + r.state : ''))));
  }
}

// ---- pages --------------------------------------------------------------

function show(id) {
  $$('.view').forEach(v => { v.hidden = v.id !== id; });
  $('#nav').hidden = id === 'view-signin';
}

// poller calls fn now and every POLL_MS after it finishes, until stopped.
function poller(fn) {
  let timer = null;
  let stopped = false;
  const tick = async () => {
    try { await fn(); } catch (err) { console.warn('refresh failed:', err.message); }
    if (!stopped) timer = setTimeout(tick, POLL_MS);
  };
  tick();
  return () => { stopped = true; clearTimeout(timer); };
}

function fleetPage() {
  show('view-fleet');
  document.title = 'Fleet \u2014 Hostplane';
  const stop = poller(async () => {
    let list;
    try {
      list = await api('GET', '/v1/clusters');
      $('#fleet-error').textContent = '';
    } catch (err) {
      $('#fleet-error').textContent = 'Cannot list clusters: ' + err.message;
      return;
    }
    const items = (list.items || []).sort((a, b) => a.name.localeCompare(b.name));
    setRows($('#clusters'), items.map(c => {
      const avail = condition(c.status.conditions, 'Available');
      return el('tr', { 'data-cluster': c.name },
        el('td', {}, el('a', { href: '#/clusters/' + encodeURIComponent(c.name) }, c.name),
          c.deletionTimestamp ? el('span', { class: 'muted' }, ' (deleting)') : null),
        el('td', { class: 'available' }, badge(avail)),
        el('td', { class: 'version' }, version(c)),
        el('td', { class: 'endpoint' }, el('code', {}, endpoint(c))),
        el('td', {}, conditionBadges(c.status.conditions)));
    }), $('#clusters-empty'));
  });
  return { name: 'fleet', stop };
}

function clusterPage(name) {
  show('view-cluster');
  document.title = name + ' \u2014 Hostplane';
  $('#cluster-name').textContent = name;
  $('#cluster-gone').hidden = true;
  $('#cluster-body').hidden = false;
  $('#cluster-error').textContent = '';
  $('#cluster-available').replaceChildren();
  for (const id of ['#cluster-summary', '#pki-summary', '#events']) $(id).replaceChildren();
  for (const id of ['#cluster-conditions', '#components', '#nodepools', '#machines', '#certificates']) setRows($(id), []);
  $$('#view-cluster form').forEach(clearErrors);
  $('#delete-cluster-confirm .name').textContent = name;
  resetDelete();
  const g = $('#grafana-cluster');
  const links = [grafanaLink('hostplane-cluster-detail', 'Grafana: cluster ' + name, { cluster: name }),
    grafanaLink('hostplane-rollouts', 'rollouts', { cluster: name }),
    grafanaLink('hostplane-ignition-pki', 'Ignition and PKI')].filter(Boolean);
  g.replaceChildren(...links.flatMap((a, i) => i ? [' \u00b7 ', a] : [a]));
  g.hidden = links.length === 0;

  const base = '/v1/clusters/' + encodeURIComponent(name);
  let gone = false;
  let pkiAt = 0;
  const stopPoll = poller(async () => {
    if (gone) return;
    let c;
    try {
      c = await api('GET', base);
    } catch (err) {
      if (err.status === 404) {
        gone = true;
        $('#cluster-gone').hidden = false;
        $('#cluster-body').hidden = true;
        $('#cluster-available').replaceChildren();
        return;
      }
      $('#cluster-error').textContent = 'Cannot read the cluster: ' + err.message;
      return;
    }
    $('#cluster-error').textContent = '';
    renderCluster(c);
    const [comps, pools, machines] = await Promise.all([
      api('GET', base + '/components').catch(() => null),
      api('GET', base + '/nodepools').catch(() => null),
      api('GET', base + '/machines').catch(() => null),
    ]);
    if (comps) renderComponents(comps.items || []);
    if (pools) renderNodePools(name, pools.items || []);
    if (machines) renderMachines(machines.items || []);
    if (Date.now() - pkiAt > 10000) {
      try {
        renderPKI(await api('GET', base + '/pki'));
        pkiAt = Date.now();
      } catch (err) {
        $('#pki-summary').replaceChildren(el('dt', {}, 'Status'), el('dd', {}, err.status === 404 ? 'not issued yet' : err.message));
      }
    }
  });
  const stopEvents = followEvents(base + '/events');
  app.cluster = name;
  return { name: 'cluster', stop: () => { stopPoll(); stopEvents(); app.cluster = null; } };
}

function renderCluster(c) {
  $('#cluster-available').replaceChildren(badge(condition(c.status.conditions, 'Available'), 'Available'));
  const ign = c.status.ignitionEndpoint || '';
  $('#cluster-summary').replaceChildren(
    el('dt', {}, 'Version'), el('dd', { id: 'cluster-version' }, version(c)),
    el('dt', {}, 'Endpoint'), el('dd', {}, el('code', {}, endpoint(c) || '\u2014')),
    el('dt', {}, 'Ignition'), el('dd', {}, el('code', {}, ign || '\u2014')),
    el('dt', {}, 'Platform'), el('dd', {}, c.spec.platform.type + ', ' + (c.spec.controllerAvailabilityPolicy || '')),
    el('dt', {}, 'Created'), el('dd', {}, ago(c.creationTimestamp)),
    c.deletionTimestamp ? [el('dt', {}, 'Deleting'), el('dd', {}, 'since ' + ago(c.deletionTimestamp))] : []);
  setRows($('#cluster-conditions'), (c.status.conditions || []).map(k => el('tr', { 'data-type': k.type },
    el('td', {}, k.type), el('td', {}, badge(k)), el('td', {}, k.reason || ''), el('td', { class: 'message' }, k.message || ''),
    el('td', {}, ago(k.lastTransitionTime)))));
}

function renderComponents(items) {
  setRows($('#components'), items.map(k => el('tr', { 'data-component': k.name },
    el('td', {}, k.name), el('td', {}, k.status.readyReplicas + ' / ' + k.spec.replicas),
    el('td', {}, k.status.version || k.spec.version), el('td', {}, conditionBadges(k.status.conditions)))));
}

// renderNodePools updates the pools' rows in place, so a scale field being typed in keeps
// its value and focus.
function renderNodePools(cluster, items) {
  const tbody = $('#nodepools tbody');
  const seen = new Set();
  for (const p of items) {
    seen.add(p.name);
    let tr = $('tr[data-nodepool="' + CSS.escape(p.name) + '"]', tbody);
    if (!tr) {
      tr = nodePoolRow(cluster, p.name);
      tbody.append(tr);
    }
    const desired = p.spec.replicas !== undefined && p.spec.replicas !== null ? p.spec.replicas
      : (p.spec.autoScaling ? p.spec.autoScaling.min + '\u2013' + p.spec.autoScaling.max : '?');
    $('.ready', tr).textContent = p.status.readyReplicas + ' / ' + desired;
    $('.ready', tr).setAttribute('data-ready', p.status.readyReplicas);
    $('.ready', tr).setAttribute('data-desired', desired);
    $('.version', tr).textContent = p.status.version || p.spec.release.version;
    $('.conditions', tr).replaceChildren(conditionBadges(p.status.conditions));
    tr.classList.toggle('deleting', !!p.deletionTimestamp);
  }
  for (const tr of $$('tr[data-nodepool]', tbody)) if (!seen.has(tr.getAttribute('data-nodepool'))) tr.remove();
  $('#nodepools-empty').hidden = items.length > 0;
}

function nodePoolRow(cluster, name) {
  const path = '/v1/clusters/' + encodeURIComponent(cluster) + '/nodepools/' + encodeURIComponent(name);
  const scale = el('form', { class: 'inline scale', autocomplete: 'off' },
    el('div', { class: 'field' },
      el('input', { type: 'number', name: 'replicas', class: 'replicas', 'aria-label': 'replicas of ' + name, 'data-field': 'spec.replicas' }),
      el('p', { class: 'field-error', 'data-error-for': 'spec.replicas', role: 'alert' })),
    el('button', { type: 'submit' }, 'Scale'),
    el('p', { class: 'form-error', role: 'alert' }));
  onSubmit(scale, async f => {
    const v = $('input', f).value;
    await api('PATCH', path, { spec: { replicas: v === '' ? null : Number(v) } });
    $('input', f).value = '';
  });
  const del = el('form', { class: 'inline delete' },
    el('button', { type: 'submit', class: 'danger' }, 'Delete'),
    el('p', { class: 'form-error', role: 'alert' }));
  onSubmit(del, async f => {
    const b = $('button', f);
    if (!f.dataset.armed) { // a second click deletes
      f.dataset.armed = 'true';
      b.textContent = 'Really delete ' + name;
      return;
    }
    delete f.dataset.armed;
    b.textContent = 'Delete';
    await api('DELETE', path);
  });
  return el('tr', { 'data-nodepool': name },
    el('td', {}, name), el('td', { class: 'ready' }), el('td', { class: 'version' }), el('td', { class: 'conditions' }),
    el('td', {}, scale), el('td', {}, del));
}

function renderMachines(items) {
  items.sort((a, b) => (a.nodePool + a.name).localeCompare(b.nodePool + b.name));
  setRows($('#machines'), items.map(m => el('tr', { 'data-machine': m.name, 'data-phase': m.phase },
    el('td', {}, m.name), el('td', {}, m.nodePool), el('td', {}, m.phase + (m.fault ? ' (' + m.fault + ')' : '')),
    el('td', {}, m.nodeName || ''), el('td', {}, m.version || ''), el('td', {}, el('code', {}, m.providerID || '')))),
    $('#machines-empty'));
}

function renderPKI(p) {
  $('#pki-summary').replaceChildren(
    el('dt', {}, 'Ready'), el('dd', { id: 'pki-ready' }, p.ready ? 'yes' : 'no' + (p.message ? ': ' + p.message : '')),
    el('dt', {}, 'Serial'), el('dd', {}, el('code', {}, p.serial || '')),
    el('dt', {}, 'Next rotation'), el('dd', {}, p.nextRotation ? new Date(p.nextRotation).toISOString() + ' (' + ago(p.nextRotation) + ')' : ''));
  const certs = (p.certificates || []).slice().sort((a, b) => Date.parse(a.notAfter) - Date.parse(b.notAfter));
  setRows($('#certificates'), certs.map(k => {
    const left = (Date.parse(k.notAfter) - Date.now()) / 1000;
    return el('tr', { 'data-certificate': k.name, class: left < 7 * 86400 ? 'soon' : '' },
      el('td', {}, k.name + (k.isCA ? ' (CA)' : '')), el('td', {}, k.subject), el('td', {}, k.issuer),
      el('td', {}, new Date(k.notAfter).toISOString()), el('td', {}, left > 0 ? duration(Math.round(left)) : 'expired'));
  }));
}

// followEvents reads the Server-Sent Events stream with fetch (the bearer token goes in a
// header) and reconnects with ?since= after a drop, until stopped.
function followEvents(path) {
  const ctl = new AbortController();
  const list = $('#events');
  const state = $('#events-state');
  let since = '';
  let stopped = false;
  const add = (type, data) => {
    let ev = {};
    try { ev = JSON.parse(data); } catch (e) { ev = { type, data }; }
    if (ev.time) since = ev.time;
    const summary = ev.data && typeof ev.data === 'object'
      ? Object.entries(ev.data).slice(0, 4).map(([k, v]) => k + '=' + (typeof v === 'object' ? JSON.stringify(v) : v)).join(' ') : '';
    list.prepend(el('li', { 'data-event-type': ev.type || type },
      el('time', {}, ev.time ? new Date(ev.time).toLocaleTimeString() : ''), ' ',
      el('strong', {}, (ev.type || type || '').replace(/^io\.hostplane\./, '')), ' ',
      el('span', { class: 'muted' }, [ev.subject, summary].filter(Boolean).join(' '))));
    while (list.children.length > 200) list.lastChild.remove();
  };
  const run = async () => {
    while (!stopped) {
      try {
        state.textContent = '(connecting)';
        const url = path + (since ? '?since=' + encodeURIComponent(since) : '');
        const res = await api('GET', url, undefined, { raw: true, accept: 'text/event-stream', signal: ctl.signal });
        state.textContent = '(live)';
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value.replace(/\r\n/g, '\n');
          let i;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            const block = buf.slice(0, i);
            buf = buf.slice(i + 2);
            let type = '';
            const data = [];
            for (const line of block.split('\n')) {
              if (line.startsWith('event:')) type = line.slice(6).trim();
              else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
            }
            if (data.length) add(type, data.join('\n'));
          }
        }
      } catch (err) {
        if (stopped || err.name === 'AbortError') return;
        if (err instanceof APIError && err.status === 401) return;
      }
      if (stopped) return;
      state.textContent = '(reconnecting)';
      await new Promise(r => setTimeout(r, POLL_MS));
    }
  };
  run();
  return () => { stopped = true; ctl.abort(); state.textContent = ''; };
}

// ---- cluster actions ----------------------------------------------------

function resetDelete() {
  $('#delete-cluster-button').hidden = false;
  $('#delete-cluster-confirm').hidden = true;
  $('#delete-cluster-cancel').hidden = true;
}

function wireActions() {
  onSubmit($('#signin-form'), async f => {
    const t = $('#signin-token', f).value.trim();
    sessionStorage.setItem(TOKEN_KEY, t);
    try {
      await api('GET', '/v1/clusters');
    } catch (err) {
      sessionStorage.removeItem(TOKEN_KEY);
      throw err;
    }
    $('#signin-token', f).value = '';
    await loadReleases();
    route();
  });
  $('#signout').addEventListener('click', () => signOut(''));

  onSubmit($('#create-cluster'), async f => {
    const name = $('#create-cluster-name', f).value.trim();
    const version = $('#create-cluster-release', f).value;
    await api('POST', '/v1/clusters', { name, spec: { release: { version } } });
    $('#create-cluster-name', f).value = '';
    location.hash = '#/clusters/' + encodeURIComponent(name);
  });

  onSubmit($('#upgrade-cluster'), async f => {
    await api('PATCH', '/v1/clusters/' + encodeURIComponent(app.cluster),
      { spec: { release: { version: $('#upgrade-cluster-release', f).value } } });
  });

  onSubmit($('#kubeconfig'), async () => {
    const res = await api('POST', '/v1/clusters/' + encodeURIComponent(app.cluster) + '/kubeconfigs', {}, { raw: true, accept: '*/*' });
    const url = URL.createObjectURL(await res.blob());
    const a = el('a', { href: url, download: app.cluster + '.kubeconfig' });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  });

  onSubmit($('#delete-cluster'), async () => {
    $('#delete-cluster-button').hidden = true;
    $('#delete-cluster-confirm').hidden = false;
    $('#delete-cluster-cancel').hidden = false;
  });
  $('#delete-cluster-cancel').addEventListener('click', resetDelete);
  $('#delete-cluster-confirm').addEventListener('click', async () => {
    const f = $('#delete-cluster');
    clearErrors(f);
    try {
      await api('DELETE', '/v1/clusters/' + encodeURIComponent(app.cluster));
      resetDelete();
      location.hash = '#/';
    } catch (err) {
      if (err.status !== 401) showError(f, err);
    }
  });

  onSubmit($('#create-nodepool'), async f => {
    const name = $('#create-nodepool-name', f).value.trim();
    const r = $('#create-nodepool-replicas', f).value;
    const c = await api('GET', '/v1/clusters/' + encodeURIComponent(app.cluster));
    await api('POST', '/v1/clusters/' + encodeURIComponent(app.cluster) + '/nodepools', {
      name,
      spec: { replicas: r === '' ? 0 : Number(r), release: { version: c.spec.release.version },
        management: { upgradeType: 'Replace', autoRepair: true } },
    });
    $('#create-nodepool-name', f).value = '';
  });
}

// ---- routing ------------------------------------------------------------

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  route();
  $('#signin-error').textContent = message || '';
}

function route() {
  if (app.view) { app.view.stop(); app.view = null; }
  if (!token()) {
    show('view-signin');
    document.title = 'Sign in \u2014 Hostplane';
    $('#signin-token').focus();
    return;
  }
  const m = location.hash.match(/^#\/clusters\/([^/]+)$/);
  app.view = m ? clusterPage(decodeURIComponent(m[1])) : fleetPage();
}

async function main() {
  try {
    const res = await fetch('config.json', { cache: 'no-store' });
    if (res.ok) app.config = await res.json();
  } catch (err) {
    app.config = {};
  }
  const fleet = grafanaLink('hostplane-fleet-overview', 'Grafana: fleet');
  if (fleet) { $('#grafana-fleet').href = fleet.href; $('#grafana-fleet').hidden = false; }
  wireActions();
  window.addEventListener('hashchange', route);
  if (token()) await loadReleases();
  route();
}

main();
