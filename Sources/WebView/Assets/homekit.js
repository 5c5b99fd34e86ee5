// HomeKit: find accessories on the network, pair one with its setup code, list and remove
// pairings: the gateway's `discover`, `pair` and `unpair` requests, as over MQTT.
'use strict';

App.pages.homekit = {
  render(main) {
    main.innerHTML = [
      '<h1>HomeKit accessories</h1>',
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
    table.innerHTML = found.length === 0 ? '<tr><td class="muted">Nothing announced itself.</td></tr>' :
      '<tr><th>Name</th><th>Model</th><th>Category</th><th>Address</th><th></th></tr>' + found.map((a) =>
        '<tr><td>' + App.esc(a.name) + '</td><td>' + App.esc(a.model) + '</td><td>' + App.esc(a['category-name']) +
        '</td><td>' + App.esc(a.host + ':' + a.port) + '</td><td>' + (a.paired ? '<span class="muted">paired</span>' :
          '<button data-use data-host="' + App.esc(a.host) + '" data-port="' + App.esc(a.port) + '" data-name="' +
          App.esc(a.name) + '">Pair…</button>') + '</td></tr>').join('');
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
    table.innerHTML = pairings.length === 0 ? '<tr><td class="muted">No pairings.</td></tr>' :
      '<tr><th>Pairing</th><th>Name</th><th>Address</th><th></th></tr>' + pairings.map((p) =>
        '<tr><td><code>' + App.esc(p.pairing) + '</code></td><td>' + App.esc(p.name || '—') + '</td><td>' +
        App.esc(p.host + ':' + p.port) + '</td><td><button class="danger" data-unpair="' + App.esc(p.pairing) +
        '">Unpair</button></td></tr>').join('');
  },
};
