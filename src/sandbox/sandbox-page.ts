/**
 * The sandbox gateway's page: what it received, newest first, read from /sandbox/received
 * every two seconds. Values are set as text (never as HTML): tokens and payloads come from
 * whoever registered them.
 */
export const SANDBOX_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Herald sandbox gateway</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; color: #1b1f24; background: #fff; }
  h1 { font-size: 1.25rem; margin: 0 0 .25rem; }
  p { margin: 0 0 1rem; color: #4a5360; }
  table { border-collapse: collapse; width: 100%; }
  th, td { text-align: left; padding: .35rem .5rem; border-bottom: 1px solid #d8dde3; vertical-align: top; }
  th { font-weight: 600; white-space: nowrap; }
  td.token, td.payload { font-family: ui-monospace, monospace; font-size: 12px; overflow-wrap: anywhere; }
  .ok { color: #116329; }
  .refused { color: #a40e26; }
  @media (prefers-color-scheme: dark) {
    body { color: #e6e9ee; background: #14171b; }
    p { color: #a3acb9; }
    th, td { border-color: #323840; }
    .ok { color: #56d364; }
    .refused { color: #ff7b72; }
  }
</style>
</head>
<body>
<h1>Herald sandbox gateway</h1>
<p>Notifications received for APNs, FCM and web push, newest first (JSON: <a href="/sandbox/received">/sandbox/received</a>).</p>
<table>
  <thead><tr><th>Time</th><th>Platform</th><th>Answer</th><th>Token</th><th>Payload</th></tr></thead>
  <tbody id="rows"><tr><td colspan="5">Nothing received yet.</td></tr></tbody>
</table>
<script>
  const rows = document.getElementById('rows');
  function cell(text, className) {
    const td = document.createElement('td');
    td.textContent = text;
    if (className) td.className = className;
    return td;
  }
  async function refresh() {
    try {
      const { received } = await (await fetch('/sandbox/received')).json();
      if (received.length === 0) return;
      rows.replaceChildren(...received.slice().reverse().map((n) => {
        const tr = document.createElement('tr');
        tr.append(
          cell(new Date(n.at).toLocaleTimeString()),
          cell(n.platform),
          cell(n.status + ' ' + n.answer, n.status < 300 ? 'ok' : 'refused'),
          cell(n.token, 'token'),
          cell(typeof n.payload === 'string' ? n.payload : JSON.stringify(n.payload), 'payload'),
        );
        return tr;
      }));
    } catch {
      // The sandbox stopped; the next tick tries again.
    }
  }
  refresh();
  setInterval(refresh, 2000);
</script>
</body>
</html>
`;
