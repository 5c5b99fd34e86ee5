// The page's core: the live feed over the WebSocket (reconnecting by itself), the home as the
// gateway last described it, requests and their answers, and the hash routes to the pages.
'use strict';

const App = {
  home: null,          // the last `home` document
  chars: new Map(),    // characteristic topic -> {acc, svc, ch, meta}
  accessories: new Map(), // accessory id -> accessory
  rooms: new Map(),    // room id -> room
  connected: false,    // the gateway's broker connection
  live: false,         // the WebSocket is open
  events: [],          // newest last
  errors: [],
  bindings: new Map(), // characteristic topic -> [function(value)] of the page on screen
  pages: {},           // route name -> {render(main, args), leave?()}
  current: null,
  socket: null,
  nextId: 1,
  pending: new Map(),  // request id -> {resolve, timer}
  retry: 0,
  listeners: {events: [], errors: []},
};

// ---- Requests: one per write, answered exactly as on MQTT ----

/** Sends `payload` to `topic` through the gateway; resolves with its answer (never rejects). */
App.request = function (topic, payload) {
  return new Promise((resolve) => {
    if (!App.live) {
      resolve({status: 'error', code: 'disconnected', message: 'not connected to the gateway; retrying'});
      return;
    }
    const id = App.nextId++;
    const timer = setTimeout(() => {
      App.pending.delete(id);
      resolve({status: 'error', code: 'timeout', message: 'no answer from the gateway within 30 s'});
    }, 30000);
    App.pending.set(id, {resolve, timer});
    App.socket.send(JSON.stringify({id, topic, payload: payload === undefined ? '' : String(payload)}));
  });
};

/** A gateway request (`$gateway/request/<op>`) with a JSON body. */
App.gatewayRequest = function (op, fields) {
  return App.request(App.base() + '/$gateway/request/' + op, JSON.stringify(fields || {}));
};

App.base = () => (App.home ? App.home.base : 'home');

// ---- The live feed ----

App.connect = function () {
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const socket = new WebSocket(scheme + '//' + location.host + '/ws');
  App.socket = socket;
  App.setLink('connecting');
  socket.onopen = () => {
    App.live = true;
    App.retry = 0;
    App.setLink(App.connected ? 'live' : 'broker');
  };
  socket.onmessage = (message) => {
    let frame;
    try { frame = JSON.parse(message.data); } catch (e) { return; }
    App.receive(frame);
  };
  socket.onclose = () => {
    App.live = false;
    if (App.socket !== socket) return;
    for (const [, waiting] of App.pending) {
      clearTimeout(waiting.timer);
      waiting.resolve({status: 'error', code: 'disconnected', message: 'the connection to the gateway closed'});
    }
    App.pending.clear();
    App.setLink('offline');
    App.reconnectLater();
  };
};

/** After the gateway restarts or the network drops: try again, slower each time, up to 5 s. */
App.reconnectLater = function () {
  const delay = Math.min(5000, 250 * Math.pow(2, App.retry++));
  setTimeout(async () => {
    // A refused token closes the socket too: tell the two apart before trying again.
    try {
      const response = await fetch('/api/session', {cache: 'no-store'});
      if (response.status === 401) { App.askToken(false); return; }
    } catch (e) { /* the gateway is not back yet */ }
    App.connect();
  }, delay);
};

App.receive = function (frame) {
  switch (frame.type) {
    case 'home':
      App.setHome(frame);
      break;
    case 'history':
      App.events = frame.events || [];
      App.errors = frame.errors || [];
      App.notify('events', null);
      App.notify('errors', null);
      break;
    case 'update':
      if (frame.values) App.applyValues(frame.values);
      if (frame.seen) App.applySeen(frame.seen);
      if (frame.events) { App.remember(App.events, frame.events); App.notify('events', frame.events); }
      if (frame.errors) { App.remember(App.errors, frame.errors); App.notify('errors', frame.errors); }
      if (frame.connected !== undefined) { App.connected = frame.connected; App.setLink(); }
      break;
    case 'answer': {
      const waiting = App.pending.get(frame.id);
      if (waiting) {
        clearTimeout(waiting.timer);
        App.pending.delete(frame.id);
        waiting.resolve(frame.answer);
      }
      break;
    }
  }
};

App.remember = function (list, entries) {
  list.push(...entries);
  if (list.length > 200) list.splice(0, list.length - 200);
};

App.on = function (kind, listener) { App.listeners[kind].push(listener); };
App.notify = function (kind, entries) { for (const listener of App.listeners[kind]) listener(entries); };

App.setHome = function (home) {
  App.home = home;
  App.connected = home.connected;
  App.chars.clear();
  App.accessories.clear();
  App.rooms.clear();
  for (const room of home.rooms) App.rooms.set(room.id, room);
  for (const acc of home.accessories) {
    App.accessories.set(acc.id, acc);
    for (const svc of acc.services) {
      for (const ch of svc.chars) {
        ch.topic = svc.topic + '/' + ch.slug;
        App.chars.set(ch.topic, {acc, svc, ch, meta: home.metas[ch.m]});
      }
    }
  }
  App.setLink();
  App.route();
};

App.applyValues = function (values) {
  for (const topic in values) {
    const entry = App.chars.get(topic);
    if (!entry) continue;
    entry.ch.v = values[topic];
    const listeners = App.bindings.get(topic);
    if (listeners) for (const listener of listeners) listener(entry.ch.v);
  }
};

/** When the gateway last heard from accessories (`{id: {at, reconnects}}`): kept, and shown where the page shows it. */
App.applySeen = function (seen) {
  for (const id in seen) {
    const acc = App.accessories.get(id);
    if (acc) acc.seen = seen[id];
  }
  App.showSeen();
};

/** An accessory's last seen, as an element `App.showSeen` keeps up to date; empty before it was heard from. */
App.seenTag = function (acc) {
  return '<span class="seen muted" data-seen="' + App.esc(acc.id) + '" hidden></span>';
};

/** Writes every last seen on the page: after an update, and every few seconds ("5 s ago" moves on by itself). */
App.showSeen = function () {
  for (const element of document.querySelectorAll('[data-seen]')) {
    const acc = App.accessories.get(element.dataset.seen);
    if (!acc || !acc.seen) { element.hidden = true; continue; }
    const shown = Format.seen(acc.seen);
    element.textContent = shown.text;
    element.title = shown.title;
    element.hidden = false;
  }
};
setInterval(() => App.showSeen(), 5000);

/** Calls `listener(value)` whenever the characteristic at `topic` changes, while this page shows. */
App.bind = function (topic, listener) {
  let list = App.bindings.get(topic);
  if (!list) { list = []; App.bindings.set(topic, list); }
  list.push(listener);
};

App.setLink = function (state) {
  const link = document.getElementById('link');
  if (!state) state = App.live ? (App.connected ? 'live' : 'broker') : 'offline';
  const words = {
    connecting: 'connecting…', live: 'live', broker: 'broker disconnected', offline: 'reconnecting…',
  };
  link.dataset.state = state;
  link.textContent = words[state] || state;
  const banner = document.getElementById('banner');
  if (state === 'offline') {
    banner.textContent = 'The gateway is not answering; this page reconnects by itself.';
    banner.hidden = false;
  } else if (state === 'broker') {
    banner.textContent = 'The gateway has lost its MQTT broker; values shown may be old.';
    banner.hidden = false;
  } else {
    banner.hidden = true;
  }
};

// ---- Pages ----

App.route = function () {
  const hash = location.hash.replace(/^#\/?/, '');
  if (hash === 'token-refused') { App.askToken(true); return; }
  const [name, ...rest] = hash.split('/');
  const page = App.pages[name || 'home'] ? (name || 'home') : 'home';
  if (App.current && App.pages[App.current].leave) App.pages[App.current].leave();
  App.current = page;
  for (const link of document.querySelectorAll('[data-nav]')) {
    link.classList.toggle('active', link.dataset.nav === (page === 'accessory' ? 'home' : page));
  }
  App.bindings.clear();
  // A fresh element each time: the last page's listeners go with the old one.
  const old = document.getElementById('main');
  const main = old.cloneNode(false);
  old.replaceWith(main);
  if (!App.home) { main.innerHTML = '<p class="muted loading">Waiting for the gateway to describe the home…</p>'; return; }
  App.pages[page].render(main, rest.map(decodeURIComponent));
  App.showSeen();
};

App.askToken = function (refused) {
  const dialog = document.getElementById('token-dialog');
  document.getElementById('token-refused').hidden = !refused;
  if (!dialog.open) dialog.showModal();
};

// ---- Small helpers for the pages ----

/** Text made safe for HTML. */
App.esc = function (text) {
  return String(text).replace(/[&<>"']/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c]));
};

/** Shows an answer in `element`: ok briefly, an error until the next attempt. */
App.showAnswer = function (element, answer) {
  clearTimeout(element._fade);
  element.hidden = false;
  if (answer.status === 'ok') {
    element.className = 'answer ok';
    element.textContent = 'ok';
    element._fade = setTimeout(() => { element.hidden = true; }, 3000);
  } else {
    element.className = 'answer error';
    element.textContent = (answer.code || 'error') + ': ' + (answer.message || '');
  }
};

App.showPending = function (element) {
  clearTimeout(element._fade);
  element.hidden = false;
  element.className = 'answer pending';
  element.textContent = '…';
};

/** Click a topic to select it, for copy and paste (the clipboard API needs https). */
document.addEventListener('click', (event) => {
  const code = event.target.closest('code.topic');
  if (!code) return;
  const range = document.createRange();
  range.selectNodeContents(code);
  const selection = getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
  if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(code.textContent).catch(() => {});
});
