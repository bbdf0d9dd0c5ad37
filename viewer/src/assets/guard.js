// Loaded first by every page: script errors and console.error calls are shown in
// #console-errors, where tests (and curious users) read them.
(function () {
  var errs = [];
  function show() {
    var e = document.getElementById('console-errors');
    if (e && errs.length) { e.hidden = false; e.textContent = errs.join('\n'); }
  }
  function put(m) { errs.push(String(m)); show(); }
  window.addEventListener('error', function (ev) { put('Uncaught ' + ev.message); });
  window.addEventListener('unhandledrejection', function (ev) { put('Unhandled ' + ev.reason); });
  var ce = console.error;
  console.error = function () { put(Array.prototype.join.call(arguments, ' ')); ce.apply(console, arguments); };
  document.addEventListener('DOMContentLoaded', show);
})();
