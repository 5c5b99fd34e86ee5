// The homes: each with its base topic and counts, the primary one marked; add, rename, remove
// and make primary, as the `homes` and `home/…` requests do (an administrator's). Every home
// but this page's is served on its own base topic; its accessories are seen there.
'use strict';

App.pages.homes = {
  render(main) {
    main.innerHTML = [
      '<h1>Homes</h1>',
      '<section class="card"><table class="homes"><thead><tr><th>Name</th><th>Base topic</th><th>Rooms</th>',
      '<th>Accessories</th><th></th></tr></thead><tbody id="homes-list"><tr><td colspan="5" class="muted">…</td></tr></tbody></table>',
      '<span class="answer" id="homes-answer" hidden></span></section>',
      '<section class="card"><h2>Add a home</h2>',
      '<p class="muted">Served at once on its own base topic, with the same topics as this one.</p>',
      '<div class="row"><input id="home-name" placeholder="Name" aria-label="Name">',
      '<input id="home-base" placeholder="Base topic (optional)" aria-label="Base topic">',
      '<button id="home-add" class="primary">Add</button></div></section>',
    ].join('');
    main.querySelector('#home-add').addEventListener('click', () => this.add());
    main.querySelector('#homes-list').addEventListener('click', (event) => {
      const button = event.target.closest('button[data-op]');
      if (button) this.act(button.dataset.op, button.dataset.home);
    });
    this.load();
  },

  async load() {
    const result = await App.gatewayRequest('homes', {});
    const list = document.getElementById('homes-list');
    if (!list) return;
    if (result.status !== 'ok') {
      list.innerHTML = '<tr><td colspan="5" class="error">' + App.esc(result.code + ': ' + result.message) + '</td></tr>';
      return;
    }
    this.homes = result.data;
    list.innerHTML = result.data.map((home) => [
      '<tr data-home-id="', App.esc(home.id), '"><td>', App.esc(home.name),
      home.primary ? ' <span class="badge">primary</span>' : '', '</td>',
      '<td><code class="topic">', App.esc(home['base-topic']), '</code></td><td>', home.rooms, '</td><td>',
      home.accessories, '</td><td class="actions">',
      '<button data-op="rename" data-home="', App.esc(home.id), '">Rename</button>',
      home.primary ? '' : '<button data-op="primary" data-home="' + App.esc(home.id) + '">Make primary</button>',
      // The home on this gateway's own base topic stays: it is the one this page serves.
      home.primary || home['base-topic'] === App.base() ? '' : '<button data-op="remove" data-home="' + App.esc(home.id) + '">Remove</button>',
      '</td></tr>',
    ].join('')).join('');
  },

  async add() {
    const name = document.getElementById('home-name').value.trim();
    const base = document.getElementById('home-base').value.trim();
    const answer = document.getElementById('homes-answer');
    App.showPending(answer);
    const fields = {name};
    if (base) fields['base-topic'] = base;
    const result = await App.gatewayRequest('home/add', fields);
    App.showAnswer(answer, result);
    if (result.status === 'ok') {
      document.getElementById('home-name').value = '';
      document.getElementById('home-base').value = '';
      this.load();
    }
  },

  async act(op, id) {
    const home = (this.homes || []).find((h) => h.id === id);
    if (!home) return;
    let result;
    if (op === 'rename') {
      const name = prompt('New name for ' + home.name, home.name);
      if (!name) return;
      result = await App.gatewayRequest('home/rename', {home: id, name});
    } else if (op === 'primary') {
      result = await App.gatewayRequest('home/primary', {home: id});
    } else {
      const fields = {home: id};
      if (home.accessories > 0) {
        const others = this.homes.filter((h) => h.id !== id).map((h) => h.name);
        const target = prompt(home.name + ' holds ' + home.accessories + ' accessories. Move them to which home? (' + others.join(', ') + ')', others[0] || '');
        if (!target) return;
        fields['move-to'] = target;
      } else if (!confirm('Remove ' + home.name + ' and clear its topics?')) {
        return;
      }
      result = await App.gatewayRequest('home/remove', fields);
    }
    App.showAnswer(document.getElementById('homes-answer'), result);
    this.load();
  },
};
