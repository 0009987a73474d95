// The dashboard's terminal: xterm.js over the exec WebSocket, whose binary
// messages start with a channel byte (0 stdin, 1 stdout, 2 stderr,
// 3 status, 4 resize), as `gantry exec -it` speaks it.
(function () {
  "use strict";
  const form = document.getElementById("shell-command");
  const status = document.getElementById("shell-status");
  const replica = form.dataset.replica;
  const term = new Terminal({ cursorBlink: true, fontSize: 13, scrollback: 5000 });
  const fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open(document.getElementById("terminal"));
  fit.fit();
  // For the browser's console and the dashboard's test: synthetic key
  // events reach xterm twice (as keys and as text), a paste once.
  window.gantryTerminal = term;
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();
  let socket = null;
  let ended = false;

  function send(channel, bytes) {
    if (!socket || socket.readyState !== WebSocket.OPEN) return;
    const message = new Uint8Array(bytes.length + 1);
    message[0] = channel;
    message.set(bytes, 1);
    socket.send(message);
  }
  function sendSize() {
    send(4, encoder.encode(JSON.stringify({ cols: term.cols, rows: term.rows })));
  }
  function say(text, state) {
    status.textContent = text;
    status.dataset.state = state;
  }

  function start(command) {
    if (socket) socket.close();
    term.reset();
    ended = false;
    const query = new URLSearchParams({ tty: "true", stdin: "true" });
    command.trim().split(/\s+/).filter(Boolean).forEach((arg) => query.append("command", arg));
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    socket = new WebSocket(`${scheme}//${location.host}/ui/replicas/${encodeURIComponent(replica)}/exec?${query}`);
    socket.binaryType = "arraybuffer";
    say("connecting…", "connecting");
    socket.onopen = () => {
      say("connected: " + command, "open");
      sendSize();
      term.focus();
    };
    socket.onmessage = (event) => {
      const data = new Uint8Array(event.data);
      if (data.length === 0) return;
      const payload = data.subarray(1);
      if (data[0] === 1 || data[0] === 2) {
        term.write(payload);
      } else if (data[0] === 3) {
        const end = JSON.parse(decoder.decode(payload));
        ended = true;
        say(`exited with code ${end.exitCode}` + (end.error ? `: ${end.error}` : ""), "exited");
      }
    };
    socket.onclose = (event) => {
      if (event.reason) say("closed: " + event.reason, "refused");
      else if (!ended) say("closed", "closed");
    };
  }

  term.onData((text) => send(0, encoder.encode(text)));
  term.onResize(sendSize);
  window.addEventListener("resize", () => fit.fit());
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    start(form.elements.command.value);
  });
  start(form.elements.command.value);
})();
