// HomeKit: this gateway's own bridge (its setup code and QR code, for an administrator), then
// find accessories on the network, pair one with its setup code, list and remove pairings: the
// gateway's `discover`, `pair` and `unpair` requests, as over MQTT.
'use strict';

App.pages.homekit = {
  render(main) {
    main.innerHTML = [
      '<h1>HomeKit accessories</h1>',
      '<section class="card" id="bridge-card" hidden><h2>This gateway as a HomeKit bridge</h2>',
      '<p>In the Home app, add an accessory and scan this code, or enter the setup code ',
      '<code id="bridge-code"></code>.</p>',
      '<img id="bridge-qr" alt="The bridge\'s setup QR code" width="232" height="232">',
      '<p class="muted"><code id="bridge-uri"></code></p></section>',
      '<p id="hap-note" class="muted" hidden>This gateway has no <code>hap</code> source: add <code>- type: hap</code> ',
      'under <code>sources</code> in its config to pair HomeKit accessories.</p>',
      '<div class="columns">',
      '<section class="card"><h2>Discover</h2>',
      '<form id="discover-form" class="row"><label>Seconds <input id="discover-timeout" type="number" min="0.5" max="30" ',
      'step="0.5" value="3"></label><button class="primary">Search the network</button></form>',
      '<span class="answer" id="discover-answer" hidden></span>',
      '<table class="list" id="discovered"></table></section>',
      '<section class="card"><h2>Pair</h2>',
      '<form id="pair-form" class="form">',
      '<label>Host <input id="pair-host" required placeholder="192.168.1.40"></label>',
      '<label>Port <input id="pair-port" type="number" min="1" max="65535" required placeholder="51826"></label>',
      '<label>Setup code <input id="pair-code" required placeholder="XXX-XX-XXX" pattern="\\d{3}-\\d{2}-\\d{3}"></label>',
      '<label>Name <input id="pair-name" placeholder="optional"></label>',
      '<div class="row"><button class="primary">Pair</button><span class="answer" id="pair-answer" hidden></span></div>',
      '</form></section>',
      '</div>',
      '<section class="card"><h2>Pairings</h2><table class="list" id="pairings"></table>',
      '<span class="answer" id="unpair-answer" hidden></span></section>',
    ].join('');
    main.querySelector('#discover-form').addEventListener('submit', (event) => { event.preventDefault(); this.discover(); });
    main.querySelector('#pair-form').addEventListener('submit', (event) => { event.preventDefault(); this.pair(); });
    main.addEventListener('click', (event) => {
      const button = event.target.closest('button[data-use], button[data-unpair]');
      if (!button) return;
      if (button.dataset.use !== undefined) {
        document.getElementById('pair-host').value = button.dataset.host;
        document.getElementById('pair-port').value = button.dataset.port;
        document.getElementById('pair-name').value = button.dataset.name;
        document.getElementById('pair-code').focus();
      } else {
        this.unpair(button.dataset.unpair);
      }
    });
    this.loadPairings();
    this.loadBridge();
  },

  // The bridge's setup, shown only to an administrator of a home whose bridge runs (a member or
  // a guest gets a 403, a home without a bridge a 404: the card stays hidden). The QR code is
  // the server's SVG as an image: nothing of it becomes markup of the page.
  async loadBridge() {
    let body;
    try {
      const response = await fetch('/api/homekit/setup', {cache: 'no-store'});
      if (!response.ok) return;
      body = await response.json();
    } catch (e) {
      return;
    }
    const card = document.getElementById('bridge-card');
    if (!card) return;
    document.getElementById('bridge-code').textContent = body.code;
    document.getElementById('bridge-uri').textContent = body.uri;
    document.getElementById('bridge-qr').src = '/api/homekit/setup.svg';
    card.hidden = false;
  },

  async discover() {
    const answer = document.getElementById('discover-answer');
    App.showPending(answer);
    const timeout = Number(document.getElementById('discover-timeout').value) || 3;
    const result = await App.gatewayRequest('discover', {timeout});
    App.showAnswer(answer, result);
    const table = document.getElementById('discovered');
    if (!table || result.status !== 'ok') return;
    const found = result.data || [];
    // Built as nodes with textContent: names and models are what a peer on the LAN announced,
    // and none of it may become markup.
    table.replaceChildren();
    if (found.length === 0) {
      table.append(this.row('td', ['Nothing announced itself.'], 'muted'));
      return;
    }
    table.append(this.row('th', ['Name', 'Model', 'Category', 'Address', '']));
    for (const a of found) {
      let action;
      if (a.paired) {
        action = document.createElement('span');
        action.className = 'muted';
        action.textContent = 'paired';
      } else {
        action = document.createElement('button');
        action.dataset.use = '';
        action.dataset.host = a.host;
        action.dataset.port = String(a.port);
        action.dataset.name = a.name;
        action.textContent = 'Pair…';
      }
      table.append(this.row('td', [a.name, a.model, a['category-name'], a.host + ':' + a.port, action]));
    }
  },

  /** A table row of `tag` cells: text (as textContent, never markup) or a node. */
  row(tag, cells, className) {
    const row = document.createElement('tr');
    for (const cell of cells) {
      const element = document.createElement(tag);
      if (cell instanceof Node) element.append(cell); else element.textContent = cell === undefined ? '' : String(cell);
      if (className) element.className = className;
      row.append(element);
    }
    return row;
  },

  async pair() {
    const answer = document.getElementById('pair-answer');
    App.showPending(answer);
    const fields = {
      host: document.getElementById('pair-host').value,
      port: Number(document.getElementById('pair-port').value),
      code: document.getElementById('pair-code').value,
    };
    const name = document.getElementById('pair-name').value;
    if (name) fields.name = name;
    const result = await App.gatewayRequest('pair', fields);
    App.showAnswer(answer, result);
    if (result.status === 'ok') this.loadPairings();
  },

  async unpair(id) {
    if (!confirm('Remove the pairing ' + id + '? The accessory leaves the home.')) return;
    const answer = document.getElementById('unpair-answer');
    App.showPending(answer);
    const result = await App.gatewayRequest('unpair', {pairing: id});
    App.showAnswer(answer, result);
    this.loadPairings();
  },

  async loadPairings() {
    let body;
    try {
      const response = await fetch('/api/pairings', {cache: 'no-store'});
      body = await response.json();
    } catch (e) {
      return;
    }
    const table = document.getElementById('pairings');
    if (!table) return;
    document.getElementById('hap-note').hidden = body.hap;
    const pairings = body.pairings || [];
    // Names and pairing ids come from the accessories: nodes with textContent, as above.
    table.replaceChildren();
    if (pairings.length === 0) {
      table.append(this.row('td', ['No pairings.'], 'muted'));
      return;
    }
    table.append(this.row('th', ['Pairing', 'Name', 'Address', '']));
    for (const p of pairings) {
      const id = document.createElement('code');
      id.textContent = p.pairing;
      const unpair = document.createElement('button');
      unpair.className = 'danger';
      unpair.dataset.unpair = p.pairing;
      unpair.textContent = 'Unpair';
      table.append(this.row('td', [id, p.name || '—', p.host + ':' + p.port, unpair]));
    }
  },
};
