// Formatting for people. Every shown number also keeps its exact value in data-value.
const fmt = {
  count(n) {
    return n === null || n === undefined ? '\u2013' : Number(n).toLocaleString('en-US');
  },
  // Durations in ns: "850 ns", "410 \u00b5s", "5.12 ms", "3.20 s", "2.5 min".
  dur(ns) {
    if (ns === null || ns === undefined || Number.isNaN(Number(ns))) return '\u2013';
    const v = Number(ns);
    const a = Math.abs(v);
    const p = (x) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
    if (a < 1e3) return v.toFixed(0) + ' ns';
    if (a < 1e6) return p(v / 1e3) + ' \u00b5s';
    if (a < 1e9) return p(v / 1e6) + ' ms';
    if (a < 120e9) return p(v / 1e9) + ' s';
    if (a < 7200e9) return p(v / 60e9) + ' min';
    return p(v / 3600e9) + ' h';
  },
  us(us) {
    return us === null || us === undefined ? '\u2013' : fmt.dur(Number(us) * 1e3);
  },
  bytes(b) {
    if (b === null || b === undefined) return '\u2013';
    let v = Number(b);
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) {
      v /= 1024;
      i++;
    }
    return (i ? v.toFixed(v >= 100 ? 0 : 1) : v.toFixed(0)) + ' ' + units[i];
  },
  pct(x) {
    return x === null || x === undefined ? '\u2013' : (Number(x) * 100).toFixed(1) + '%';
  },
  // Unix ns -> "2026-11-22 14:07:15.123 UTC" (ms precision: ns timestamps exceed a double).
  time(ns) {
    if (!ns) return '\u2013';
    const d = new Date(Number(ns) / 1e6);
    if (Number.isNaN(d.getTime())) return '\u2013';
    return d.toISOString().replace('T', ' ').replace('Z', ' UTC');
  },
  secs(s) {
    return fmt.dur(Number(s) * 1e9);
  },
};
