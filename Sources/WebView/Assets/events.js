// Events: what `$gateway/event` carries, live, and the errors the gateway answered lately
// (refused sets, unknown topics, failed requests, from MQTT clients and this page alike).
'use strict';

App.pages.events = {
  render(main) {
    main.innerHTML = [
      '<h1>Events</h1>',
      '<div class="columns">',
      '<section class="card"><h2>Live <code class="topic">', App.esc(App.base()), '/$gateway/event</code></h2>',
      '<ol id="event-list" class="log"></ol></section>',
      '<section class="card"><h2>Recent errors</h2><ol id="error-list" class="log"></ol></section>',
      '</div>',
    ].join('');
    this.fill('event-list', App.events, this.eventLine);
    this.fill('error-list', App.errors, this.errorLine);
  },

  fill(id, entries, line) {
    const list = document.getElementById(id);
    if (!list) return;
    list.innerHTML = entries.length ? entries.slice().reverse().map(line).join('') : '<li class="muted">None yet.</li>';
  },

  prepend(id, entries, line) {
    const list = document.getElementById(id);
    if (!list) return;
    const empty = list.querySelector('.muted');
    if (empty) empty.remove();
    list.insertAdjacentHTML('afterbegin', entries.slice().reverse().map(line).join(''));
    while (list.children.length > 200) list.lastElementChild.remove();
  },

  eventLine(entry) {
    const event = entry.event || {};
    const details = [];
    if (event.accessory) details.push(event.accessory.name || event.accessory);
    if (event.room) details.push(event.room.name || event.room);
    if (event['old-name']) details.push('was ' + event['old-name']);
    if (event['old-room']) details.push('from ' + event['old-room']);
    if (event.name) details.push(event.name);
    return '<li><time>' + Format.time(entry.time) + '</time> <strong>' + App.esc(event.event || '?') + '</strong> ' +
      App.esc(details.join(' · ')) + '</li>';
  },

  errorLine(entry) {
    return '<li class="error-line"><time>' + Format.time(entry.time) + '</time> <strong>' + App.esc(entry.code) +
      '</strong> <span class="muted">' + App.esc(entry.op) + '</span> ' + App.esc(entry.message) +
      '<br><code class="topic">' + App.esc(entry.topic) + '</code></li>';
  },
};

App.on('events', (entries) => {
  if (App.current !== 'events') return;
  const page = App.pages.events;
  if (entries) page.prepend('event-list', entries, page.eventLine);
  else page.fill('event-list', App.events, page.eventLine);
});

App.on('errors', (entries) => {
  if (App.current !== 'events') return;
  const page = App.pages.events;
  if (entries) page.prepend('error-list', entries, page.errorLine);
  else page.fill('error-list', App.errors, page.errorLine);
});
