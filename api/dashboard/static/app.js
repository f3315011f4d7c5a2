// dagflow dashboard: live refresh of a page's #live part over
// Server-Sent Events (one stream per page), polling when the stream
// fails, the bulk forms' select-all boxes, and the hint that a DAG
// scrolls sideways. No framework, no inline script (the
// Content-Security-Policy allows none).
(function () {
  'use strict';
  var body = document.body;
  var live = document.getElementById('live');
  var dot = document.getElementById('live-state');

  // A DAG wider than its box scrolls sideways: say so above it.
  function hints() {
    document.querySelectorAll('.dagwrap').forEach(function (w) {
      var h = w.previousElementSibling;
      if (h && h.classList.contains('scroll-hint')) { h.classList.toggle('on', w.scrollWidth > w.clientWidth + 1); }
    });
  }
  hints();
  window.addEventListener('resize', hints);
  if (!live || !body.dataset.live) { return; }
  var base = body.dataset.base || '';
  var run = body.dataset.run || '';
  var minGap = 800; // ms between two refreshes
  var busy = false, again = false, timer = null, last = 0, refreshes = 0;

  function state(s, title) {
    if (!dot) { return; }
    dot.className = 'live-dot ' + s;
    dot.title = title;
    dot.textContent = s === 'on' ? 'live' : (s === 'poll' ? 'polling' : 'offline');
  }

  function editing() {
    var a = document.activeElement;
    return a && live.contains(a) && (a.tagName === 'TEXTAREA' || (a.tagName === 'INPUT' && a.type !== 'checkbox'));
  }

  function schedule() {
    if (timer) { return; }
    var wait = Math.max(0, minGap - (Date.now() - last));
    timer = setTimeout(function () { timer = null; refresh(); }, wait);
  }

  function refresh() {
    if (busy || editing()) { again = true; if (!busy) { setTimeout(schedule, 1000); } return; }
    if (Date.now() - last < minGap) { schedule(); return; }
    busy = true; last = Date.now();
    fetch(location.href, { headers: { 'X-Dashboard-Partial': '1' }, credentials: 'same-origin', cache: 'no-store' })
      .then(function (r) {
        if (r.redirected || r.status === 401) { location.reload(); return null; }
        return r.ok ? r.text() : null;
      })
      .then(function (html) { if (html !== null && html !== undefined) { swap(html); } })
      .catch(function () {})
      .then(function () { busy = false; if (again) { again = false; schedule(); } });
  }

  function swap(html) {
    var checked = {};
    live.querySelectorAll('input[type=checkbox][name]:checked').forEach(function (c) { checked[c.name + '\u0000' + c.value] = true; });
    var open = {};
    live.querySelectorAll('details[open] > summary').forEach(function (s) { open[s.textContent] = true; });
    live.innerHTML = html;
    live.querySelectorAll('input[type=checkbox][name]').forEach(function (c) { if (checked[c.name + '\u0000' + c.value]) { c.checked = true; } });
    live.querySelectorAll('details > summary').forEach(function (s) { if (open[s.textContent]) { s.parentNode.open = true; } });
    hints();
    refreshes++;
    live.setAttribute('data-refreshes', String(refreshes));
  }

  var pollTimer = null;
  function poll() {
    if (pollTimer) { return; }
    state('poll', 'the event stream failed: polling every 5 s');
    pollTimer = setInterval(refresh, 5000);
  }
  function stopPoll() {
    if (pollTimer) { clearInterval(pollTimer); pollTimer = null; }
  }

  // One stream per visible page: a browser opens at most 6 HTTP/1.1
  // connections per host, so a hidden tab gives its stream back (the
  // 7th tab would otherwise wait forever) and catches up when shown.
  var es = null, fails = 0, broken = false;
  function openStream() {
    if (es) { return; }
    es = new EventSource(base + '/events' + (run ? '?run=' + encodeURIComponent(run) : ''));
    es.addEventListener('change', function () { refresh(); });
    es.onopen = function () {
      // After an error the browser reconnected: what changed in the gap
      // was not sent, so fetch the page once.
      if (broken) { refresh(); }
      broken = false; fails = 0;
      stopPoll();
      state('on', 'live: the page updates as the runs change');
    };
    es.onerror = function () { broken = true; fails++; if (fails >= 2) { poll(); } };
  }
  function closeStream() {
    if (es) { es.close(); es = null; }
    fails = 0; broken = false;
    stopPoll();
    state('off', 'paused while the page is hidden');
  }

  if (window.EventSource) {
    document.addEventListener('visibilitychange', function () {
      if (document.hidden) { closeStream(); return; }
      openStream();
      refresh(); // changes while hidden were not heard
    });
    if (!document.hidden) { openStream(); } else { state('off', 'paused while the page is hidden'); }
  } else {
    poll();
  }
  if (body.dataset.page === 'overview' || body.dataset.page === 'queues' || body.dataset.page === 'nodes') {
    // Rates and ages move without a run changing.
    setInterval(function () { if (!document.hidden) { refresh(); } }, 5000);
  }
  if (run) {
    // The stream can miss a change stamped far behind the newest one (a
    // writer's clock): an unfinished run's page also refreshes every 30 s.
    setInterval(function () { if (!document.hidden && live.querySelector('[data-unfinished]')) { refresh(); } }, 30000);
  }

  document.addEventListener('change', function (ev) {
    var t = ev.target;
    if (t && t.matches && t.matches('input[data-select-all]')) {
      var form = t.form || document;
      form.querySelectorAll('input[type=checkbox][name="' + t.getAttribute('data-select-all') + '"]').forEach(function (c) { c.checked = t.checked; });
    }
  });
})();
