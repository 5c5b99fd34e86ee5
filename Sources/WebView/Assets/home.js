// The home: every accessory as a tile (name, manufacturer, reachable or not, its main value and
// a toggle), grouped by room or by category as the person chooses.
'use strict';

App.pages.home = {
  grouping: localStorage.getItem('homemqtt.grouping') || 'room',
  filter: '',

  render(main) {
    const home = App.home;
    const groups = this.groups(home);
    const parts = [];
    parts.push(
      '<div class="toolbar">',
      '<h1>', App.esc(home.accessories.length), ' accessories</h1>',
      '<div class="segmented" role="group" aria-label="Group by">',
      '<button data-grouping="room" class="', this.grouping === 'room' ? 'active' : '', '">By room</button>',
      '<button data-grouping="category" class="', this.grouping === 'category' ? 'active' : '', '">By category</button>',
      '</div>',
      '<input id="filter" type="search" placeholder="Filter by name" value="', App.esc(this.filter), '">',
      '</div>');
    for (const group of groups) {
      parts.push('<section class="group"><h2>', App.esc(group.name), ' <span class="count">', group.accessories.length,
        '</span></h2><div class="tiles">');
      for (const acc of group.accessories) parts.push(this.tile(acc));
      parts.push('</div></section>');
    }
    if (groups.length === 0) parts.push('<p class="muted">No accessory is in the gateway\'s scope.</p>');
    main.innerHTML = parts.join('');
    this.bindTiles(main);
    main.querySelector('.segmented').addEventListener('click', (event) => {
      const button = event.target.closest('[data-grouping]');
      if (!button) return;
      this.grouping = button.dataset.grouping;
      localStorage.setItem('homemqtt.grouping', this.grouping);
      App.route();
    });
    const filter = main.querySelector('#filter');
    filter.addEventListener('input', () => { this.filter = filter.value; this.applyFilter(main); });
    this.applyFilter(main);
    main.addEventListener('click', this.onClick);
  },

  groups(home) {
    const byKey = new Map();
    const add = (key, name, acc) => {
      if (!byKey.has(key)) byKey.set(key, {name, accessories: []});
      byKey.get(key).accessories.push(acc);
    };
    if (this.grouping === 'category') {
      for (const acc of home.accessories) add(acc.category, Format.words(acc.category), acc);
      return [...byKey.values()].sort((a, b) => a.name.localeCompare(b.name));
    }
    // Rooms in the home's order; the default room first, as the gateway lists it.
    for (const room of home.rooms) byKey.set(room.id, {name: room.name, accessories: []});
    for (const acc of home.accessories) {
      const room = App.rooms.get(acc.room);
      add(acc.room, room ? room.name : 'Default Room', acc);
    }
    return [...byKey.values()].filter((g) => g.accessories.length > 0);
  },

  tile(acc) {
    const tileChar = acc.tile ? acc.services[acc.tile[0]].chars[acc.tile[1]] : null;
    const meta = tileChar ? App.home.metas[tileChar.m] : null;
    const toggleService = acc.toggle !== undefined ? acc.services[acc.toggle] : null;
    const parts = [
      '<article class="tile', acc.reachable ? '' : ' unreachable', toggleService ? ' has-toggle' : '', '" data-acc="', App.esc(acc.id), '" data-name="',
      App.esc(acc.name.toLowerCase()), '">',
      '<a class="tile-main" href="#/accessory/', encodeURIComponent(acc.id), '">',
      '<span class="category">', App.esc(Format.words(acc.category)), '</span>',
      '<h3>', App.esc(acc.name), '</h3>',
      '<span class="maker">', App.esc(acc.manufacturer), '</span>', App.seenTag(acc),
    ];
    if (tileChar) {
      parts.push('<span class="value" data-value="', App.esc(tileChar.topic), '">',
        App.esc(Format.value(meta, tileChar.v)), '</span>');
    }
    parts.push('</a>');
    if (!acc.reachable) parts.push('<span class="badge unreachable">Unreachable</span>');
    if (toggleService) {
      const on = tileChar && this.isOn(meta, tileChar.v);
      parts.push('<button class="toggle', on ? ' on' : '', '" data-toggle="', App.esc(toggleService.topic), '"',
        ' data-topic="', tileChar ? App.esc(tileChar.topic) : '', '" aria-pressed="', on ? 'true' : 'false',
        '" title="', App.esc(toggleService.topic), '/$toggle"', acc.reachable ? '' : ' disabled', '>',
        '<span class="knob"></span></button>');
    }
    parts.push('<span class="answer" hidden></span></article>');
    return parts.join('');
  },

  /** Whether a tile's toggle shows "on": true, or a non-zero active/power value. */
  isOn(meta, value) {
    if (!meta) return false;
    if (meta.format === 'bool') return value === true || value === 1;
    // A door is "on" when open, as HomeKit highlights it; a lock when secured (any non-zero value).
    if (meta.type === 'target-door-state') return value === 0;
    if (meta.type === 'target-position') return value > 50;
    return typeof value === 'number' && value !== 0;
  },

  bindTiles(main) {
    for (const element of main.querySelectorAll('[data-value]')) {
      const topic = element.dataset.value;
      const entry = App.chars.get(topic);
      const tile = element.closest('.tile');
      const toggle = tile.querySelector('.toggle');
      App.bind(topic, (value) => {
        element.textContent = Format.value(entry.meta, value);
        if (toggle) {
          const on = this.isOn(entry.meta, value);
          toggle.classList.toggle('on', on);
          toggle.setAttribute('aria-pressed', on ? 'true' : 'false');
        }
      });
    }
  },

  applyFilter(main) {
    const words = this.filter.trim().toLowerCase();
    for (const section of main.querySelectorAll('section.group')) {
      let shown = 0;
      for (const tile of section.querySelectorAll('.tile')) {
        const visible = !words || tile.dataset.name.includes(words);
        tile.hidden = !visible;
        if (visible) shown++;
      }
      section.hidden = shown === 0;
    }
  },

  onClick(event) {
    const button = event.target.closest('button[data-toggle]');
    if (!button) return;
    event.preventDefault();
    const answer = button.closest('.tile').querySelector('.answer');
    App.showPending(answer);
    App.request(button.dataset.toggle + '/$toggle', '').then((result) => App.showAnswer(answer, result));
  },
};
