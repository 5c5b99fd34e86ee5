// The gateway: its health (broker, sources, counts, uptime) refreshed while shown, and its scope,
// which can be changed here as with `scope/set`.
'use strict';

App.pages.gateway = {
  timer: null,

  render(main) {
    main.innerHTML = [
      '<h1>Gateway</h1>',
      '<div class="columns">',
      '<section class="card"><h2>Health</h2><dl id="health" class="facts"><dt>…</dt><dd></dd></dl>',
      '<p class="muted">Also for machines: <a href="/healthz">/healthz</a> · <a href="/metrics">/metrics</a> ',
      '(Prometheus)</p></section>',
      '<section class="card"><h2>Scope</h2>',
      '<p class="muted">What the gateway publishes and lets be written, as <code>scope/get</code> returns it. ',
      'Applying it is <code>scope/set</code>: kept in the state directory across restarts.</p>',
      '<textarea id="scope" rows="16" spellcheck="false"></textarea>',
      '<div class="row"><button id="scope-apply" class="primary">Apply</button><button id="scope-reload">Reload</button>',
      '<span class="answer" id="scope-answer" hidden></span></div></section>',
      '</div>',
    ].join('');
    main.querySelector('#scope-apply').addEventListener('click', () => this.applyScope());
    main.querySelector('#scope-reload').addEventListener('click', () => this.loadScope());
    this.loadHealth();
    this.loadScope();
    this.timer = setInterval(() => this.loadHealth(), 5000);
  },

  leave() { clearInterval(this.timer); },

  async loadHealth() {
    const result = await App.gatewayRequest('health', {});
    const list = document.getElementById('health');
    if (!list) return;
    if (result.status !== 'ok') {
      list.innerHTML = '<dt>health</dt><dd class="error">' + App.esc(result.code + ': ' + result.message) + '</dd>';
      return;
    }
    const h = result.data;
    const counts = h.counts || {};
    const rows = [
      ['Uptime', Format.duration(h.uptime || 0)],
      ['Broker', (h.broker ? h.broker.url + ' — ' + h.broker.state : '—')],
      ['Sources', (h.sources || []).map((s) => s.name).join(', ')],
      ['Rooms', counts.rooms], ['Accessories', counts.accessories], ['Characteristics', counts.characteristics],
      ['Retained topics', counts['retained-topics']], ['Sets', counts.sets], ['Gets', counts.gets], ['Errors', counts.errors],
    ];
    list.innerHTML = rows.map(([k, v]) => '<dt>' + k + '</dt><dd>' + App.esc(v === undefined ? '—' : v) + '</dd>').join('');
  },

  async loadScope() {
    const result = await App.gatewayRequest('scope/get', {});
    const area = document.getElementById('scope');
    if (!area) return;
    if (result.status === 'ok') area.value = JSON.stringify(result.data, null, 2);
    else App.showAnswer(document.getElementById('scope-answer'), result);
  },

  async applyScope() {
    const answer = document.getElementById('scope-answer');
    let scope;
    try {
      scope = JSON.parse(document.getElementById('scope').value);
    } catch (e) {
      App.showAnswer(answer, {status: 'error', code: 'invalid-json', message: e.message});
      return;
    }
    App.showPending(answer);
    App.showAnswer(answer, await App.gatewayRequest('scope/set', {scope}));
  },
};
