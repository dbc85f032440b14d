#!/usr/bin/env python3
"""usage: browser_check.py CHROMIUM HTMLFILE CHECKS.js SCREENSHOT.png  (stdlib only)

Loads HTMLFILE in headless Chromium over the DevTools protocol (--remote-debugging-pipe),
writes a full-page PNG (after load, before the checks), evaluates CHECKS.js (an expression,
may be a promise) and prints one JSON object, exit 0:
  console_errors  console.error/assert, uncaught exceptions, Log errors (network, CSP...)
  requests        non-local URLs the page or its workers asked for (CDP Network events)
  proxy           what reached the guard proxy, less Chromium's own background calls
  result, check_error, screenshot, proxy_background (count of those background calls)
Harness failure (chromium died, 60 s overall timeout...): {"harness_error": ...}, exit 2.
"""
import base64, json, os, select, shutil, signal, socket, subprocess, sys, tempfile, threading, time

TIMEOUT, WIDTH, HEIGHT, SETTLE = 60.0, 1200, 800, 0.3
LOCAL = ("file:", "data:", "blob:", "about:")
# Chromium's own start-up calls that no flag turns off; they hit the guard proxy only.
BACKGROUND = ("accounts.google.com:", "update.googleapis.com:", "http://update.googleapis.com/",
              "http://clients2.google.com/time/")
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--remote-debugging-pipe", "--no-first-run", "--no-default-browser-check",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--disable-default-apps", "--disable-features=NetworkTimeServiceQuerying",
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--proxy-bypass-list=<-loopback>",
         "--force-webrtc-ip-handling-policy=disable_non_proxied_udp", "--hide-scrollbars",
         "--mute-audio", "--window-size=%d,%d" % (WIDTH, HEIGHT)]


class Fail(Exception):
    """A harness failure, not a page failure."""


def start_guard_proxy():
    """Loopback 'proxy' that records each request's first line ("CONNECT host:443 HTTP/1.1",
    "GET http://host/x HTTP/1.1") and hangs up: nothing Chromium tries leaves the machine."""
    srv = socket.create_server(("127.0.0.1", 0))
    seen = []

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:  # closed by the main thread
                return
            with conn:
                conn.settimeout(2)
                try:
                    seen.append(conn.recv(4096).split(b"\r\n")[0].decode("latin-1"))
                except OSError:
                    pass

    threading.Thread(target=serve, daemon=True).start()
    return srv, seen


class Browser:
    def __init__(self, exe, proxy_port):
        self.profile = tempfile.mkdtemp(prefix="cdp-profile-")
        self.deadline = time.monotonic() + TIMEOUT
        self.buf, self.next_id, self.events = b"", 0, []
        cmd_r, self.wfd = os.pipe()    # chromium reads commands from its fd 3
        self.rfd, reply_w = os.pipe()  # and writes replies/events to its fd 4

        def child_fds():  # runs in the child, before exec
            os.dup2(cmd_r, 3)
            os.dup2(reply_w, 4)

        args = [exe, "--user-data-dir=" + self.profile,
                "--proxy-server=http://127.0.0.1:%d" % proxy_port] + FLAGS + ["about:blank"]
        self.log = open(os.path.join(self.profile, "stderr.log"), "wb")  # dbus/GPU noise
        self.proc = None
        try:  # close_fds=False: only the (inheritable) dup2'ed fds 3 and 4 are passed on
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self.log,
                                         stderr=self.log, preexec_fn=child_fds, close_fds=False,
                                         start_new_session=True,  # own process group
                                         env=dict(os.environ, TMPDIR=self.profile))
        finally:
            os.close(cmd_r)
            os.close(reply_w)
            if not self.proc:
                self.close()

    def close(self):
        if self.proc:
            try:  # ask politely (chromium then reaps its helpers), then kill the whole group
                self.post("Browser.close")
                self.proc.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                pass
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        os.close(self.rfd)
        os.close(self.wfd)
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def post(self, method, params=None, session=None):
        """Send a command without waiting; returns its id."""
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        data = json.dumps(msg).encode() + b"\0"
        while data:
            data = data[os.write(self.wfd, data):]
        return self.next_id

    def send(self, method, params=None, session=None):
        """Send a command and return its result; events that arrive meanwhile are queued."""
        want = self.post(method, params, session)
        while True:
            msg = self.read(self.deadline)
            if msg.get("id") == want:
                if "error" in msg:
                    raise Fail("%s: %s" % (method, msg["error"]))
                return msg["result"]
            self.events.append(msg)

    def read(self, until):
        """Next message, or None if `until` (monotonic time) passes first."""
        while b"\0" not in self.buf:
            left = min(until, self.deadline) - time.monotonic()
            if left <= 0:
                if until < self.deadline:
                    return None
                raise Fail("overall timeout of %ss" % TIMEOUT)
            if select.select([self.rfd], [], [], left)[0]:
                chunk = os.read(self.rfd, 1 << 20)
                if not chunk:
                    raise Fail("chromium closed the pipe (exit code %s)" % self.proc.poll())
                self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        msg = json.loads(raw)
        if msg.get("method") == "Target.attachedToTarget":  # a worker started by the page
            info = msg["params"]["targetInfo"]
            self.instrument(msg["params"]["sessionId"], info["type"])
        return msg

    def instrument(self, session, kind):
        """Turn on the events we judge in a page or worker session, then let it run."""
        for domain in ("Runtime", "Log", "Network", "Page") if kind == "page" else ("Runtime", "Network"):
            self.post(domain + ".enable", session=session)
        self.post("Target.setAutoAttach", {"autoAttach": True, "waitForDebuggerOnStart": True,
                                           "flatten": True}, session=session)
        self.post("Runtime.runIfWaitingForDebugger", session=session)

    def wait(self, method=None, quiet=None):
        """Wait for event `method`, or (method None) until `quiet` s pass with no message."""
        for i, msg in enumerate(self.events):
            if method and msg.get("method") == method:
                return self.events.pop(i)
        while True:
            msg = self.read(time.monotonic() + quiet if quiet else self.deadline)
            if msg is None or (method and msg.get("method") == method):
                return msg
            self.events.append(msg)


def collect(events, errors, requests, phase):
    for msg in events:
        method, p = msg.get("method"), msg.get("params", {})
        if method == "Runtime.consoleAPICalled" and p["type"] in ("error", "assert"):
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p["args"])
            frame = ((p.get("stackTrace") or {}).get("callFrames") or [{}])[0]
            errors.append({"phase": phase, "kind": "console." + p["type"], "text": text,
                           "url": frame.get("url"), "line": frame.get("lineNumber")})
        elif method == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            errors.append({"phase": phase, "kind": "exception", "url": d.get("url"),
                           "text": (d.get("exception") or {}).get("description") or d.get("text"),
                           "line": d.get("lineNumber")})
        elif method == "Log.entryAdded" and p["entry"]["level"] == "error":
            e = p["entry"]
            errors.append({"phase": phase, "kind": "log." + e["source"], "text": e["text"],
                           "url": e.get("url"), "line": e.get("lineNumber")})
        elif method == "Network.requestWillBeSent" and not p["request"]["url"].startswith(LOCAL):
            requests.append(p["request"]["url"])
        elif method == "Network.webSocketCreated" and not p["url"].startswith(LOCAL):
            requests.append(p["url"])
    events.clear()


def run(exe, html, checks_js, shot):
    url = "file://" + os.path.abspath(html)
    expression = open(checks_js, encoding="utf-8").read()
    errors, requests = [], []
    srv, seen = start_guard_proxy()
    b = None
    try:
        b = Browser(exe, srv.getsockname()[1])
        target = b.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = b.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        b.instrument(s, "page")
        b.send("Emulation.setDeviceMetricsOverride", {"width": WIDTH, "height": HEIGHT,
               "deviceScaleFactor": 1, "mobile": False}, session=s)
        b.events.clear()  # about:blank is not judged
        nav = b.send("Page.navigate", {"url": url}, session=s)
        if nav.get("errorText"):
            raise Fail("navigation failed: " + nav["errorText"])
        b.wait("Page.loadEventFired")
        b.wait(quiet=SETTLE)  # let timers and fetches started at load show up
        collect(b.events, errors, requests, "load")
        height = b.send("Page.getLayoutMetrics", session=s)["cssContentSize"]["height"]
        png = b.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                     "clip": {"x": 0, "y": 0, "width": WIDTH, "height": height, "scale": 1}}, session=s)
        with open(shot, "wb") as f:
            f.write(base64.b64decode(png["data"]))
        r = b.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                   "awaitPromise": True, "userGesture": True}, session=s)
        exc = r.get("exceptionDetails")
        check_error = ((exc.get("exception") or {}).get("description") or exc["text"]) if exc else None
        result = None if exc else r["result"].get("value")
        b.wait(quiet=SETTLE)
        collect(b.events, errors, requests, "checks")
    finally:
        if b:
            b.close()
        srv.close()
    targets = [line.split(" ")[1] for line in seen if line.count(" ") >= 2]
    proxy = [t for t in targets if not t.startswith(BACKGROUND)]
    return {"console_errors": errors, "requests": requests, "proxy": proxy,
            "proxy_background": len(targets) - len(proxy), "result": result,
            "check_error": check_error, "screenshot": os.path.abspath(shot)}


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # still run the clean-up
    try:
        out = run(*sys.argv[1:])
    except (Fail, OSError, ValueError) as e:
        print(json.dumps({"harness_error": "%s: %s" % (type(e).__name__, e)}))
        return 2
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
