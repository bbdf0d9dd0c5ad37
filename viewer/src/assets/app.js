// akbench view: a little vanilla JS over server-rendered pages. The runs list filters as you
// type; a run page follows its progress through server-sent events (no reloads).
(function () {
  'use strict';
  function $(sel) { return document.querySelector(sel); }

  function filterRuns() {
    var input = $('#run-search');
    if (!input) return;
    input.addEventListener('input', function () {
      var q = input.value.toLowerCase();
      document.querySelectorAll('#runs .run-row').forEach(function (row) {
        row.hidden = q !== '' && row.getAttribute('data-key').toLowerCase().indexOf(q) < 0;
      });
    });
  }

  function pct(r) { return r === null || r === undefined ? 'n/a' : (r * 100).toFixed(1) + '%'; }

  function applyProgress(p, updates) {
    var bar = $('#progress');
    if (bar) {
      bar.setAttribute('data-done', String(p.done));
      var width = p.planned ? Math.min(100, p.done / p.planned * 100) : 100;
      bar.querySelector('.bar').style.width = width.toFixed(1) + '%';
      $('#progress-label').textContent = p.planned
        ? p.done + ' / ' + p.planned + ' trials'
        : p.done + ' trials (no stored plan)';
    }
    var out = $('#outcomes');
    if (out) {
      out.textContent = '';
      Object.keys(p.counts).forEach(function (b) {
        var a = document.createElement('a');
        a.className = 'outcome';
        a.href = '?outcome=' + encodeURIComponent(b) + '#trials';
        var badge = document.createElement('span');
        badge.className = 'badge b-' + b;
        badge.textContent = b;
        var n = document.createElement('b');
        n.setAttribute('data-bucket', b);
        n.textContent = String(p.counts[b]);
        a.appendChild(badge); a.appendChild(document.createTextNode(' ')); a.appendChild(n);
        out.appendChild(a);
      });
    }
    Object.keys(p.agents).forEach(function (name) {
      document.querySelectorAll('#agents tr[data-agent]').forEach(function (row) {
        if (row.getAttribute('data-agent') !== name) return;
        row.querySelector('.pass').firstChild.textContent = pct(p.agents[name][0]);
        row.querySelector('.graded').textContent = String(p.agents[name][1]);
      });
    });
    // A run on a coordinator: its live section (state, ETA, workers, paused routes) comes
    // rendered and escaped by the server.
    var section = $('#live-status');
    if (section && p.live_html) {
      var fresh = new DOMParser().parseFromString(p.live_html, 'text/html').querySelector('#live-status');
      if (fresh) section.replaceWith(document.importNode(fresh, true));
    }
    var live = $('#live');
    if (live) {
      live.setAttribute('data-updates', String(updates));
      live.textContent = 'live · updated ' + new Date().toLocaleTimeString();
    }
  }

  // The tables are server-rendered pages of the run: fetch this same page again (its paging
  // and filters kept) and swap them in place, at most once a second.
  var SWAPPED = ['#agents', '#causes', '#matrix-tasks', '#matrix', '#matrix-pager', '#trial-count', '#trial-table', '#trials-pager'];
  var pending = null;
  var swaps = 0;
  function refreshTables() {
    if (pending) return;
    pending = setTimeout(function () {
      fetch(location.href, { headers: { 'Accept': 'text/html' } })
        .then(function (r) { return r.ok ? r.text() : Promise.reject(new Error('HTTP ' + r.status)); })
        .then(function (text) {
          var doc = new DOMParser().parseFromString(text, 'text/html');
          SWAPPED.forEach(function (sel) {
            var now = $(sel);
            var next = doc.querySelector(sel);
            if (now && next) now.replaceWith(document.importNode(next, true));
          });
          swaps += 1;
          var live = $('#live');
          if (live) live.setAttribute('data-swaps', String(swaps));
        })
        .catch(function (e) {
          var live = $('#live');
          if (live) live.textContent = 'could not refresh the tables: ' + e.message;
        })
        .then(function () { pending = null; });
    }, 1000);
  }

  function followRun() {
    var h = $('h1[data-run]');
    if (!h || !window.EventSource) return;
    var key = h.getAttribute('data-run');
    var updates = 0;
    var es = new EventSource('/api/runs/' + encodeURIComponent(key) + '/events');
    es.addEventListener('progress', function (ev) {
      updates += 1;
      applyProgress(JSON.parse(ev.data), updates);
      // The first event is the state the page was rendered with.
      if (updates > 1) refreshTables();
    });
    es.onerror = function () {
      var live = $('#live');
      if (live) live.textContent = 'live updates interrupted; retrying';
    };
  }

  document.addEventListener('DOMContentLoaded', function () { filterRuns(); followRun(); });
})();
