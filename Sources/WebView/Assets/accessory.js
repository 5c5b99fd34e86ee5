// An accessory: every in-scope service and characteristic with its live value, unit and
// permissions, a control fit for its metadata, each write's answer, and the MQTT topics.
'use strict';

App.pages.accessory = {
  render(main, args) {
    const acc = App.accessories.get(args[0]);
    if (!acc) {
      main.innerHTML = '<p class="muted">No accessory <code>' + App.esc(args[0] || '') +
        '</code> in scope now. <a href="#/">Back to the home</a></p>';
      return;
    }
    const room = App.rooms.get(acc.room);
    const parts = [
      '<nav class="crumbs"><a href="#/">Home</a> › ', App.esc(room ? room.name : ''), '</nav>',
      '<div class="accessory-head"><div>',
      '<h1>', App.esc(acc.name), acc.reachable ? '' : ' <span class="badge unreachable">Unreachable</span>', '</h1>',
      '<p class="muted">', App.esc(acc.manufacturer), ' · ', App.esc(acc.model), ' · ', App.esc(Format.words(acc.category)),
      '</p>', App.seenTag(acc), '</div>',
      '<div class="row"><button data-identify>Identify</button><span class="answer" data-identify-answer hidden></span></div>',
      '</div>',
      '<details class="topics"><summary>Accessory topics</summary>', this.topicList([
        ['info', acc.topic + '/$info'], ['availability', acc.topic + '/$availability'], ['state', acc.topic + '/$state'],
        ['set several', acc.topic + '/$set'], ['identify', acc.topic + '/$identify'],
      ]), '</details>',
    ];
    for (const svc of acc.services) parts.push(this.service(svc));
    main.innerHTML = parts.join('');
    this.bind(main, acc);
  },

  service(svc) {
    const parts = [
      '<section class="card service"><header><h2>', App.esc(svc.name), ' <span class="type">', App.esc(svc.type),
      '</span></h2>',
    ];
    if (svc.toggle) {
      parts.push('<div class="row"><button data-toggle="', App.esc(svc.topic), '">Toggle</button>',
        '<span class="answer" hidden></span></div>');
    }
    parts.push('</header><table class="chars"><thead><tr><th>Characteristic</th><th>Value</th><th>Control</th>',
      '<th>Permissions</th><th>Topics</th></tr></thead><tbody>');
    for (const ch of svc.chars) parts.push(this.row(App.chars.get(ch.topic)));
    parts.push('</tbody></table></section>');
    return parts.join('');
  },

  row(entry) {
    const {ch, meta} = entry;
    const topic = App.esc(ch.topic);
    return [
      '<tr data-char="', topic, '"><td><span class="name">', App.esc(Format.words(ch.desc || meta.type)), '</span>',
      '<span class="type">', App.esc(meta.type), ' · ', App.esc(meta.format), meta.unit ? ' · ' + App.esc(meta.unit) : '',
      '</span></td>',
      '<td class="live" data-live="', topic, '">', App.esc(Format.value(meta, ch.v)), '</td>',
      '<td class="control">', this.control(entry), '<span class="answer" data-answer="', topic, '" hidden></span></td>',
      '<td>', Format.perms(meta).map((p) => '<span class="perm">' + p + '</span>').join(' '),
      ch.ro ? ' <span class="perm ro" title="read-only by the gateway\'s scope">scope</span>' : '', '</td>',
      '<td><details><summary>MQTT</summary>', this.topicList([
        ['state', ch.topic + '/state'], ['set', ch.topic + '/set'], ['get', ch.topic + '/get'],
        ['result', ch.topic + '/result'], ['meta', ch.topic + '/meta'],
      ]), '</details></td></tr>',
    ].join('');
  },

  /** The control its metadata calls for; read-only characteristics only show their value. */
  control(entry) {
    const {ch, meta} = entry;
    const topic = App.esc(ch.topic);
    if (meta.event) return '<span class="muted">presses arrive as events</span>';
    if (!Format.canWrite(entry)) return '<span class="muted">' + (ch.ro ? 'read-only (scope)' : 'read-only') + '</span>';
    if (meta.valid) {
      const options = meta.valid.map(([n, name]) =>
        '<option value="' + n + '"' + (n === ch.v ? ' selected' : '') + '>' + App.esc(Format.words(name)) + '</option>');
      return '<select data-role="select" data-topic="' + topic + '">' + options.join('') + '</select>';
    }
    if (meta.format === 'bool') {
      if (!meta.perms.includes('read')) {
        return '<button data-role="trigger" data-topic="' + topic + '">Send</button>';
      }
      return '<label class="switch"><input type="checkbox" data-role="switch" data-topic="' + topic + '"' +
        (ch.v === true || ch.v === 1 ? ' checked' : '') + '><span></span></label>';
    }
    if (Format.isNumeric(meta)) {
      const value = typeof ch.v === 'number' ? ch.v : '';
      const slider = meta.min !== undefined && meta.max !== undefined
        ? '<input type="range" data-role="slider" data-topic="' + topic + '" min="' + meta.min + '" max="' + meta.max +
          '" step="' + (meta.step || 'any') + '" value="' + value + '">'
        : '';
      // A free box beside the slider: any number can be sent, and the gateway says what is wrong.
      return slider + '<input type="text" inputmode="decimal" class="number" data-role="number" data-topic="' + topic +
        '" value="' + value + '" title="Enter sends it">';
    }
    return '<input type="text" class="text" data-role="text" data-topic="' + topic + '" value="' +
      App.esc(ch.v === undefined ? '' : ch.v) + '"' + (meta.maxLength ? ' maxlength="' + meta.maxLength + '"' : '') +
      '><button data-role="send" data-topic="' + topic + '">Set</button>';
  },

  topicList(pairs) {
    return '<dl class="topic-list">' + pairs.map(([label, topic]) =>
      '<dt>' + label + '</dt><dd><code class="topic" title="Click to select">' + App.esc(topic) + '</code></dd>').join('') +
      '</dl>';
  },

  bind(main, acc) {
    for (const cell of main.querySelectorAll('[data-live]')) {
      const topic = cell.dataset.live;
      const entry = App.chars.get(topic);
      const row = cell.closest('tr');
      App.bind(topic, (value) => {
        cell.textContent = Format.value(entry.meta, value);
        cell.classList.remove('flash');
        void cell.offsetWidth; // restart the highlight
        cell.classList.add('flash');
        this.showValue(row, entry, value);
      });
    }
    main.addEventListener('change', (event) => {
      const control = event.target;
      const role = control.dataset.role;
      if (role === 'switch') this.set(main, control.dataset.topic, control.checked ? 'true' : 'false');
      else if (role === 'select') this.set(main, control.dataset.topic, control.value);
      else if (role === 'slider') this.set(main, control.dataset.topic, control.value);
    });
    main.addEventListener('input', (event) => {
      const control = event.target;
      if (control.dataset.role !== 'slider') return;
      const box = control.parentElement.querySelector('[data-role="number"]');
      if (box) box.value = control.value;
    });
    main.addEventListener('keydown', (event) => {
      const control = event.target;
      if (event.key !== 'Enter' || !['number', 'text'].includes(control.dataset.role)) return;
      event.preventDefault();
      this.set(main, control.dataset.topic, control.value);
    });
    main.addEventListener('click', (event) => {
      const button = event.target.closest('button');
      if (!button) return;
      if (button.dataset.role === 'send') {
        this.set(main, button.dataset.topic, button.parentElement.querySelector('[data-role="text"]').value);
      } else if (button.dataset.role === 'trigger') {
        this.set(main, button.dataset.topic, 'true');
      } else if (button.dataset.toggle !== undefined) {
        const answer = button.parentElement.querySelector('.answer');
        App.showPending(answer);
        App.request(button.dataset.toggle + '/$toggle', '').then((result) => App.showAnswer(answer, result));
      } else if (button.dataset.identify !== undefined) {
        const answer = main.querySelector('[data-identify-answer]');
        App.showPending(answer);
        App.request(acc.topic + '/$identify', '').then((result) => App.showAnswer(answer, result));
      }
    });
  },

  /** Writes through the gateway as `set` does; the answer shows beside the control. */
  set(main, topic, text) {
    const answer = main.querySelector('[data-answer="' + CSS.escape(topic) + '"]');
    App.showPending(answer);
    App.request(topic + '/set', text).then((result) => {
      App.showAnswer(answer, result);
      // A refused value leaves the control where the characteristic really is.
      if (result.status !== 'ok') {
        const entry = App.chars.get(topic);
        if (entry) this.showValue(answer.closest('tr'), entry, entry.ch.v, true);
      }
    });
  },

  /** Moves a control to `value`, unless the person is using it right now. */
  showValue(row, entry, value, force) {
    if (!row) return;
    for (const control of row.querySelectorAll('[data-role]')) {
      if (!force && control === document.activeElement) continue;
      switch (control.dataset.role) {
        case 'switch': control.checked = value === true || value === 1; break;
        case 'select': control.value = String(value); break;
        case 'slider': case 'number': case 'text': control.value = value === undefined || value === null ? '' : value; break;
      }
    }
  },
};
