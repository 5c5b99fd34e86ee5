// Starts the page: the token form, the routes, and the live feed.
'use strict';

document.getElementById('token-form').addEventListener('submit', () => {
  const token = document.getElementById('token-input').value;
  // The gateway keeps it in a cookie and sends the browser back here without it in the address.
  location.href = '/?token=' + encodeURIComponent(token);
});

window.addEventListener('hashchange', () => App.route());

(async function start() {
  App.route();
  try {
    const response = await fetch('/api/session', {cache: 'no-store'});
    if (response.status === 401) { App.askToken(location.hash === '#token-refused'); return; }
  } catch (e) { /* the feed retries */ }
  App.connect();
})();
