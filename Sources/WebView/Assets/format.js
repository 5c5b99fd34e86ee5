// Values as a person reads them: named valid values, units, on/off; and names made readable.
'use strict';

const Format = {};

Format.units = {
  celsius: ' °C', percentage: ' %', arcdegrees: '°', lux: ' lx', seconds: ' s', ppm: ' ppm',
  'micrograms/m3': ' µg/m³', watts: ' W', volts: ' V', amperes: ' A', kwh: ' kWh', hpa: ' hPa',
};

Format.unit = (unit) => (unit ? (Format.units[unit.toLowerCase()] || ' ' + unit) : '');

/** `target-door-state` → `Target door state`. */
Format.words = function (name) {
  const text = String(name).replace(/-/g, ' ');
  return text.charAt(0).toUpperCase() + text.slice(1);
};

Format.validName = function (meta, value) {
  if (!meta.valid) return null;
  for (const [number, name] of meta.valid) if (number === value) return name;
  return null;
};

Format.value = function (meta, value) {
  if (value === undefined || value === null) return '—';
  const named = Format.validName(meta, value);
  if (named !== null) return Format.words(named);
  if (meta.format === 'bool') {
    const on = value === true || value === 1;
    // A sensor's finding reads as yes or no; a switch as on or off.
    if (/-detected$/.test(meta.type)) return on ? 'Yes' : 'No';
    return on ? 'On' : 'Off';
  }
  if (typeof value === 'number') {
    const shown = Number.isInteger(value) ? value : Math.round(value * 100) / 100;
    return shown + Format.unit(meta.unit);
  }
  const text = String(value);
  return text.length > 60 ? text.slice(0, 57) + '…' : text;
};

Format.isNumeric = (meta) => ['int', 'float', 'uint8', 'uint16', 'uint32', 'uint64'].includes(meta.format);

Format.canWrite = (entry) => entry.meta.perms.includes('write') && !entry.ch.ro;

Format.perms = function (meta) {
  const short = {read: 'r', write: 'w', notify: 'n', hidden: 'h', 'timed-write': 'tw', 'additional-authorization': 'aa', 'write-response': 'wr'};
  return meta.perms.map((p) => short[p] || p);
};

Format.time = function (ms) {
  const date = new Date(ms);
  return date.toLocaleTimeString(undefined, {hour12: false}) + '.' + String(date.getMilliseconds()).padStart(3, '0');
};

Format.duration = function (seconds) {
  const s = Math.floor(seconds);
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  return (d ? d + ' d ' : '') + (d || h ? h + ' h ' : '') + m + ' min ' + (s % 60) + ' s';
};

/** How long ago `ms` was, roughly: `5 s`, `3 min`, `2 h`, `4 d` (never negative: clocks may differ a little). */
Format.ago = function (ms) {
  const s = Math.max(0, Math.floor((Date.now() - ms) / 1000));
  if (s < 60) return s + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min';
  if (s < 86400) return Math.floor(s / 3600) + ' h';
  return Math.floor(s / 86400) + ' d';
};

/** An accessory's last seen (`{at, reconnects}`, from the gateway) as its text and its exact time. */
Format.seen = function (seen) {
  const text = 'last seen ' + Format.ago(seen.at) + ' ago' +
    (seen.reconnects > 0 ? ' · ' + seen.reconnects + (seen.reconnects === 1 ? ' reconnect' : ' reconnects') : '');
  const date = new Date(seen.at);
  return {text, title: date.toLocaleString(undefined, {hour12: false}) + ' (' + date.toISOString() + ')'};
};
