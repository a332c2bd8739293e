// agentproc's page. Plain JavaScript, no build step, no dependency: the
// table follows GET ui/events (the API's event stream with a snapshot and
// live changes), the output pane follows GET ui/output for the selected
// process, and the buttons call the API's own routes. Every request goes
// through the same authorization as the API; nothing here is trusted more.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const rowsEl = $('rows');
  const outEl = $('out');
  const outState = $('out-state');
  const followEl = $('follow');
  const errorEl = $('error');
  const connEl = $('conn');
  const summaryEl = $('summary');
  const stopAllBtn = $('stop-all');
  const emptyEl = $('empty');

  // The token of a bearer-token server comes in the fragment (#token=...),
  // which never reaches the server; it is kept for this tab's session and
  // removed from the address bar.
  const token = (() => {
    const m = /(?:^#|&)token=([^&]*)/.exec(location.hash);
    if (m) {
      sessionStorage.setItem('agentproc-token', decodeURIComponent(m[1]));
      history.replaceState(null, '', location.pathname + location.search);
    }
    return sessionStorage.getItem('agentproc-token') || '';
  })();

  function headers(extra) {
    const h = Object.assign({}, extra || {});
    if (token) h.Authorization = 'Bearer ' + token;
    return h;
  }

  function showError(msg) {
    errorEl.textContent = msg;
    errorEl.hidden = !msg;
  }

  async function errorText(res) {
    try {
      const body = await res.json();
      return body.message + (body.detail ? ' (' + body.detail + ')' : '');
    } catch (_) {
      return res.status + ' ' + res.statusText;
    }
  }

  // post sends a JSON body, as every state-changing route requires.
  async function post(path, body) {
    const res = await fetch(path, {
      method: 'POST',
      headers: headers({ 'Content-Type': 'application/json' }),
      body: JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
    });
    if (!res.ok) throw new Error(await errorText(res));
    return res.json();
  }

  // stream reads Server-Sent Events from path with fetch (EventSource cannot
  // send an Authorization header) and calls onEvent(type, data) for each.
  // It resolves when the stream ends and rejects on an HTTP error.
  async function stream(path, signal, onOpen, onEvent) {
    const res = await fetch(path, { headers: headers(), credentials: 'same-origin', cache: 'no-store', signal });
    if (!res.ok) {
      const err = new Error(await errorText(res));
      err.status = res.status;
      throw err;
    }
    onOpen();
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let end;
      while ((end = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, end);
        buf = buf.slice(end + 2);
        let type = 'message';
        const data = [];
        for (const line of block.split('\n')) {
          if (line.startsWith('event: ')) type = line.slice(7);
          else if (line.startsWith('data: ')) data.push(line.slice(6));
        }
        if (data.length) onEvent(type, JSON.parse(data.join('\n')));
      }
    }
  }

  // ---- the table -------------------------------------------------------

  const procs = new Map(); // id -> Process (the API's shape)
  // id -> {cpu_time_ms, memory_bytes} of a running process, from the
  // snapshot and "usage" events; an exited row shows its final figures.
  const usage = new Map();
  const rowEls = new Map(); // id -> <tr>
  let selected = '';

  function fmtDuration(ms) {
    const s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return s + 's';
    const m = Math.floor(s / 60);
    if (m < 60) return m + 'm ' + (s % 60) + 's';
    const h = Math.floor(m / 60);
    if (h < 48) return h + 'h ' + (m % 60) + 'm';
    return Math.floor(h / 24) + 'd ' + (h % 24) + 'h';
  }

  function fmtBytes(n) {
    if (!n) return '';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i === 0 ? n : n.toFixed(n < 10 ? 1 : 0)) + ' ' + units[i];
  }

  function fmtCPU(ms) {
    if (ms === undefined) return '';
    return ms < 1000 ? ms + ' ms' : (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + ' s';
  }

  // state returns the word and tone of a process's state.
  function state(p) {
    if (p.running) {
      if (p.awaiting_input) return ['waiting for input', 'warn'];
      return [p.ready ? 'running, ready' : 'running', 'ok'];
    }
    const code = p.exit_code;
    switch (p.reason) {
      case 'exited': return ['exited ' + code, code === 0 ? 'done' : 'bad'];
      case 'killed': return ['killed' + (p.signal ? ' (' + p.signal + ')' : ''), 'done'];
      case 'signaled': return ['signaled' + (p.signal ? ' (' + p.signal + ')' : ''), 'bad'];
      case 'oom': return ['out of memory', 'bad'];
      case 'timeout': return ['timeout', 'warn'];
      case 'idle': return ['idle', 'warn'];
      case 'output_limit': return ['output limit', 'bad'];
      case 'shutdown': return ['shutdown', 'done'];
      case 'orphaned': return ['orphaned', 'bad'];
      default: return ['exited' + (code === undefined ? '' : ' ' + code), code === 0 ? 'done' : 'bad'];
    }
  }

  // badges lists what the process runs under: limits, sandbox where the
  // server reports one, background, a likely OOM.
  function badges(p) {
    const b = [];
    if (p.background) b.push('background');
    const l = p.limits;
    if (l) {
      if (l.memory_bytes) b.push('memory ' + fmtBytes(l.memory_bytes));
      if (l.procs) b.push('procs ' + l.procs);
      if (l.cpu) b.push('cpu ' + l.cpu);
    }
    const sb = p.sandbox;
    if (sb) {
      // {"mechanisms": [...], "network": "none", ...}: the network in the
      // badge, what the kernel enforces in its title.
      let t = 'sandbox';
      if (typeof sb.network === 'string' && sb.network) t += ', network ' + sb.network;
      b.push([t, Array.isArray(sb.mechanisms) ? sb.mechanisms.join(', ') : '']);
    }
    if (p.likely_oom) b.push('likely OOM');
    return b;
  }

  function cell(tr, cls, label) {
    const td = document.createElement('td');
    if (cls) td.className = cls;
    td.dataset.label = label;
    tr.appendChild(td);
    return td;
  }

  function button(text, label, cls, onClick) {
    const btn = document.createElement('button');
    btn.type = 'button';
    btn.textContent = text;
    btn.setAttribute('aria-label', label);
    if (cls) btn.className = cls;
    btn.addEventListener('click', onClick);
    return btn;
  }

  function makeRow(id) {
    const tr = document.createElement('tr');
    tr.dataset.id = id;
    const st = cell(tr, 'state-cell', 'State');
    const pill = document.createElement('span');
    pill.className = 'state';
    st.appendChild(pill);
    // The short ID, as agentproc ps shows it and every command takes.
    const idCell = cell(tr, 'id', 'ID');
    idCell.textContent = id.slice(0, 8);
    idCell.title = id;
    // One child under the cell, so that the narrow layout's label and the
    // command with its badges are the cell's two columns.
    const cmdWrap = document.createElement('div');
    cell(tr, 'cmd', 'Command').appendChild(cmdWrap);
    const cmdBtn = button('', '', 'link cmd-btn', () => select(id, true));
    cmdBtn.setAttribute('aria-controls', 'output-pane');
    cmdWrap.appendChild(cmdBtn);
    const bdg = document.createElement('div');
    bdg.className = 'badges';
    cmdWrap.appendChild(bdg);
    cell(tr, 'owner', 'Owner');
    cell(tr, 'num age', 'Age');
    cell(tr, 'num cpu', 'CPU');
    cell(tr, 'num mem', 'Memory');
    cell(tr, 'ports', 'Ports');
    const act = cell(tr, 'actions', '');
    act.appendChild(button('Interrupt', 'Interrupt', 'interrupt', () => act_(id, 'interrupt')));
    act.appendChild(button('Stop', 'Stop', 'danger stop', () => act_(id, 'stop')));
    tr.addEventListener('click', (e) => {
      if (e.target.closest('button, a')) return;
      select(id, false);
    });
    return tr;
  }

  function fillRow(tr, p) {
    const [word, tone] = state(p);
    const pill = tr.querySelector('.state');
    pill.textContent = word;
    pill.dataset.tone = tone;
    tr.dataset.state = p.running ? 'running' : 'exited';
    const cmdBtn = tr.querySelector('.cmd-btn');
    cmdBtn.textContent = p.command;
    cmdBtn.setAttribute('aria-label', 'Show output of ' + p.command);
    const bdg = tr.querySelector('.badges');
    bdg.replaceChildren(...badges(p).map((t) => {
      const s = document.createElement('span');
      s.className = 'badge';
      if (Array.isArray(t)) {
        s.textContent = t[0];
        if (t[1]) s.title = t[1];
      } else {
        s.textContent = t;
      }
      return s;
    }));
    tr.querySelector('.owner').textContent = p.owner || '—';
    fillUsage(tr, p);
    const ports = tr.querySelector('.ports');
    ports.replaceChildren(...(p.ports || []).map((pt) => {
      const title = pt.network + ' ' + pt.addr + ':' + pt.port + ' (pid ' + pt.pid + ')';
      if (pt.network.startsWith('udp')) {
        // Nothing a browser can open: the port as text.
        const span = document.createElement('span');
        span.textContent = 'udp ' + pt.port;
        span.title = title;
        return span;
      }
      // A wildcard address is reached by the name this page was opened
      // with; a specific one by itself.
      const host = /^(0\.0\.0\.0|::)$/.test(pt.addr) ? location.hostname : pt.addr;
      const a = document.createElement('a');
      a.href = 'http://' + (host.includes(':') && !host.startsWith('[') ? '[' + host + ']' : host) + ':' + pt.port + '/';
      a.textContent = String(pt.port);
      a.title = title;
      a.target = '_blank';
      a.rel = 'noopener noreferrer';
      return a;
    }));
    for (const b of tr.querySelectorAll('.actions button')) b.disabled = !p.running;
    tr.setAttribute('aria-current', String(tr.dataset.id === selected));
    fillAge(tr, p);
  }

  // fillUsage shows a running process's CPU time and memory now (where the
  // server reads them), an exited one's total CPU time and peak memory.
  function fillUsage(tr, p) {
    const u = p.running ? usage.get(p.id) : undefined;
    const cpu = tr.querySelector('.cpu');
    const mem = tr.querySelector('.mem');
    cpu.textContent = p.running ? (u ? fmtCPU(u.cpu_time_ms) : '') : fmtCPU(p.cpu_time_ms);
    mem.textContent = p.running ? (u ? fmtBytes(u.memory_bytes) : '') : fmtBytes(p.peak_memory_bytes);
    mem.title = p.running ? 'memory now' : 'peak memory';
  }

  function fillAge(tr, p) {
    const end = p.running ? Date.now() : (p.exited_at_unix || 0) * 1000;
    const el = tr.querySelector('.age');
    el.textContent = (p.running ? '' : 'ran ') + fmtDuration(end - p.started_at_unix * 1000);
  }

  // order puts running processes first, each group newest first, as
  // GET /list does.
  function order() {
    const list = [...procs.values()];
    list.sort((a, b) => (b.running - a.running) || (b.started_at_unix - a.started_at_unix) || (a.id < b.id ? 1 : -1));
    const want = list.map((p) => rowEls.get(p.id));
    want.forEach((tr, i) => {
      if (rowsEl.children[i] !== tr) rowsEl.insertBefore(tr, rowsEl.children[i] || null);
    });
    const running = list.filter((p) => p.running).length;
    summaryEl.textContent = running + ' running, ' + (list.length - running) + ' exited';
    document.title = 'agentproc (' + running + ' running)';
    stopAllBtn.disabled = running === 0;
    stopAllBtn.textContent = running ? 'Stop all (' + running + ')' : 'Stop all';
    emptyEl.hidden = list.length > 0;
  }

  // upsert merges a process into the table. A row never goes from exited
  // back to running: an event older than the snapshot may arrive after it.
  function upsert(p) {
    const old = procs.get(p.id);
    if (old && !old.running && p.running) return;
    procs.set(p.id, p);
    let tr = rowEls.get(p.id);
    if (!tr) {
      tr = makeRow(p.id);
      rowEls.set(p.id, tr);
    }
    fillRow(tr, p);
    if (p.id === selected) showSelectedState();
  }

  function patch(id, fields) {
    const p = procs.get(id);
    if (!p || !p.running) return;
    upsert(Object.assign({}, p, fields));
  }

  function remove(id) {
    procs.delete(id);
    usage.delete(id);
    const tr = rowEls.get(id);
    if (tr) tr.remove();
    rowEls.delete(id);
  }

  function onEvent(type, e) {
    switch (type) {
      case 'snapshot': {
        // A hidden page's stream reads no usage: it keeps the figures it
        // has until it is shown and asks again.
        if (streamUsage) {
          usage.clear();
          for (const [id, u] of Object.entries(e.usage || {})) usage.set(id, u);
        }
        const seen = new Set();
        for (const p of e.processes) { seen.add(p.id); procs.delete(p.id); upsert(p); }
        for (const id of [...procs.keys()]) if (!seen.has(id)) remove(id);
        break;
      }
      case 'started':
      case 'exited':
      case 'info':
        if (type === 'exited') usage.delete(e.id);
        if (e.info) upsert(e.info);
        break;
      case 'ready':
        patch(e.id, { ready: true });
        break;
      case 'awaiting_input':
        patch(e.id, { awaiting_input: true });
        break;
      case 'dropped':
        remove(e.id);
        break;
      case 'usage':
        for (const [id, u] of Object.entries(e.usage || {})) {
          usage.set(id, u);
          const tr = rowEls.get(id);
          const p = procs.get(id);
          if (tr && p) fillUsage(tr, p);
        }
        return; // no row moved

      case 'lost':
        throw new Error('events lost');
    }
    order();
  }

  // ---- the event stream, reconnected with a back-off ------------------

  // A hidden page asks for no usage (ui/events?usage=0), so that the server
  // reads no CPU time or memory for it every 2 s; shown again, it reconnects
  // at once for a snapshot that carries every figure. The rest of the
  // stream goes on while hidden: the tab's title keeps its count.
  let followCtl = null;
  let streamUsage = true; // whether the stream followed now reads usage
  document.addEventListener('visibilitychange', () => {
    if (followCtl) followCtl.abort();
  });

  async function follow() {
    let delay = 500;
    for (;;) {
      const ctl = new AbortController();
      followCtl = ctl;
      streamUsage = !document.hidden;
      try {
        await stream(streamUsage ? 'ui/events' : 'ui/events?usage=0', ctl.signal, () => {
          connEl.textContent = 'Live';
          connEl.dataset.state = 'live';
          showError('');
          delay = 500;
        }, onEvent);
      } catch (err) {
        if (ctl.signal.aborted) continue; // shown or hidden: ask again as the page is now
        if (err.status === 401 && !token) {
          // Retrying cannot help a page opened without the token: say how
          // to open it, and start again once the address carries one.
          showError(err.message + ' To open this page with a bearer token, use the address with #token=TOKEN at its end ' +
            '(agentproc serve --listen prints it).');
          connEl.textContent = 'Needs the token';
          connEl.dataset.state = 'down';
          await new Promise((r) => window.addEventListener('hashchange', r, { once: true }));
          location.reload();
          return;
        }
        if (err.status) showError(err.message);
      }
      ctl.abort();
      connEl.textContent = 'Reconnecting…';
      connEl.dataset.state = 'down';
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 10000);
    }
  }

  // ---- the output pane --------------------------------------------------

  const MAX_OUT = 1 << 20; // characters the pane keeps of followed output
  let outCtl = null;
  let partialEl = null;
  let shown = 0;

  function showSelectedState() {
    const p = procs.get(selected);
    if (!p) return;
    outState.textContent = p.command + ' — ' + state(p)[0];
    // A prompt is answered here, as agentproc input does: the text and
    // Enter go to the process's stdin.
    answerEl.hidden = !(p.running && p.awaiting_input);
  }

  const answerEl = $('answer');
  const answerText = $('answer-text');
  answerEl.addEventListener('submit', async (e) => {
    e.preventDefault();
    const id = selected;
    try {
      await post(encodeURIComponent(id) + '/stdin', { data: answerText.value + '\n' });
      answerText.value = '';
      answerEl.hidden = true;
      showError('');
    } catch (err) {
      showError('Sending the answer failed: ' + err.message);
    }
  });

  // styled returns the spans of a block of output in their colours: the
  // server sends each span's text rendered (no control reaches here) and
  // colours only as #rrggbb; both are set through the DOM, never as markup
  // (the CSP allows no inline style, the CSSOM is not inline style).
  function styled(spans) {
    const f = document.createDocumentFragment();
    const hex = /^#[0-9a-f]{6}$/;
    for (const sp of spans) {
      if (!sp.fg && !sp.bg && !sp.bold && !sp.dim && !sp.italic && !sp.underline) {
        f.append(document.createTextNode(sp.text));
        continue;
      }
      const e = document.createElement('span');
      e.className = 'sgr';
      e.textContent = sp.text;
      if (sp.fg && hex.test(sp.fg)) e.style.color = sp.fg;
      if (sp.bg && hex.test(sp.bg)) e.style.backgroundColor = sp.bg;
      if (sp.bold) e.style.fontWeight = 'bold';
      if (sp.dim) e.style.opacity = '0.7';
      if (sp.italic) e.style.fontStyle = 'italic';
      if (sp.underline) e.style.textDecoration = 'underline';
      f.append(e);
    }
    const wrap = document.createElement('span');
    wrap.append(f);
    return wrap;
  }

  function appendOut(node) {
    outEl.insertBefore(node, partialEl);
  }

  function scrollOut() {
    if (followEl.checked) outEl.scrollTop = outEl.scrollHeight;
  }

  function onOutput(c) {
    if (c.omitted > 0) {
      const m = document.createElement('span');
      m.className = 'omitted';
      m.textContent = '… ' + c.omitted + ' bytes omitted …';
      appendOut(m);
    }
    if (c.text) {
      appendOut(c.spans ? styled(c.spans) : document.createTextNode(c.text));
      shown += c.text.length;
    }
    partialEl.replaceChildren(c.partial_spans ? styled(c.partial_spans) : document.createTextNode(c.partial));
    if (c.awaiting_input && !c.text && !c.partial) {
      const m = document.createElement('span');
      m.className = 'prompt';
      m.textContent = '⏎ waiting for input';
      appendOut(m);
    }
    // Keep the pane bounded: drop the oldest followed text, and say so
    // once at the top (the server still holds its head and tail).
    let dropped = false;
    while (shown > MAX_OUT && outEl.firstChild && outEl.firstChild !== partialEl) {
      const n = outEl.firstChild;
      if (!n.classList || !n.classList.contains('dropped')) shown -= (n.textContent || '').length;
      n.remove();
      dropped = true;
    }
    if (dropped) {
      const m = document.createElement('span');
      m.className = 'omitted dropped';
      m.textContent = '… earlier output not kept on this page …';
      outEl.insertBefore(m, outEl.firstChild);
    }
    outEl.dataset.next = c.next;
    if (c.eof) outEl.dataset.eof = 'true';
    scrollOut();
  }

  async function followOutput(id, ctl) {
    let offset = 0;
    let delay = 500;
    for (;;) {
      let eof = false;
      try {
        await stream('ui/output?id=' + encodeURIComponent(id) + '&offset=' + offset, ctl.signal, () => { delay = 500; }, (type, c) => {
          // A block already read when another row was selected is not
          // this pane's any more.
          if (type !== 'output' || ctl.signal.aborted) return;
          onOutput(c);
          offset = c.resume;
          eof = c.eof;
        });
      } catch (err) {
        if (ctl.signal.aborted) return;
        if (err.status) {
          outState.textContent = err.message;
          return;
        }
      }
      if (eof || ctl.signal.aborted) return;
      // Reconnect from the start of the unfinished line, which is shown
      // again whole.
      partialEl.textContent = '';
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 10000);
    }
  }

  function select(id, focusPane) {
    if (selected !== id) {
      selected = id;
      for (const [rid, tr] of rowEls) tr.setAttribute('aria-current', String(rid === id));
      if (outCtl) outCtl.abort();
      outEl.replaceChildren();
      delete outEl.dataset.eof;
      delete outEl.dataset.next;
      outEl.dataset.id = id;
      shown = 0;
      partialEl = document.createElement('span');
      partialEl.className = 'partial';
      outEl.appendChild(partialEl);
      outCtl = new AbortController();
      showSelectedState();
      followOutput(id, outCtl);
    }
    if (focusPane) {
      outEl.focus({ preventScroll: true });
      outEl.scrollIntoView({ block: 'nearest' });
    }
  }

  followEl.addEventListener('change', scrollOut);
  outEl.addEventListener('scroll', () => {
    // Scrolling up stops following; scrolling back to the end resumes.
    // The page itself only ever scrolls to the end, so a scroll that
    // leaves it is the reader's.
    followEl.checked = outEl.scrollHeight - outEl.scrollTop - outEl.clientHeight < 4;
  });

  // ---- actions, each behind a confirmation ------------------------------

  const dialog = $('confirm');
  function confirmStop(text, okText) {
    $('confirm-text').textContent = text;
    $('confirm-ok').textContent = okText;
    dialog.showModal();
    return new Promise((resolve) => {
      const done = (v) => () => { cleanup(); dialog.close(); resolve(v); };
      const ok = done(true);
      const cancel = done(false);
      const onCancel = (e) => { e.preventDefault(); cancel(); };
      function cleanup() {
        $('confirm-ok').removeEventListener('click', ok);
        $('confirm-cancel').removeEventListener('click', cancel);
        dialog.removeEventListener('cancel', onCancel);
      }
      $('confirm-ok').addEventListener('click', ok);
      $('confirm-cancel').addEventListener('click', cancel);
      dialog.addEventListener('cancel', onCancel);
    });
  }

  async function act_(id, what) {
    const p = procs.get(id);
    if (!p) return;
    const verb = what === 'stop' ? 'Stop' : 'Interrupt';
    const detail = what === 'stop'
      ? ' It is sent a terminate signal, then killed if it has not exited after the grace period.'
      : ' It is sent an interrupt (Ctrl+C).';
    if (!await confirmStop(verb + ' “' + p.command + '”?' + detail, verb)) return;
    try {
      if (what === 'stop') {
        upsert(await post('ui/stop', { id }));
        order();
      } else {
        await post(encodeURIComponent(id) + '/signal', { signal: 'interrupt' });
      }
      showError('');
    } catch (err) {
      showError(verb + ' failed: ' + err.message);
    }
  }

  stopAllBtn.addEventListener('click', async () => {
    const running = [...procs.values()].filter((p) => p.running);
    const owners = [...new Set(running.map((p) => p.owner || ''))];
    const whose = owners.length === 1 && owners[0] ? ' of owner “' + owners[0] + '”' : '';
    if (!await confirmStop('Stop all ' + running.length + ' running processes' + whose + '?', 'Stop all')) return;
    try {
      const res = await post('stop-all', {});
      for (const p of res.processes) upsert(p);
      order();
      showError('');
    } catch (err) {
      showError('Stop all failed: ' + err.message);
    }
  });

  // Ages tick on the page's own clock; nothing is fetched for them.
  setInterval(() => {
    for (const [id, tr] of rowEls) {
      const p = procs.get(id);
      if (p && p.running) fillAge(tr, p);
    }
  }, 1000);

  follow();
})();
