"""The tutorial's interactive packet ladders, used in headless Chromium as a reader would (check-site
calls check_ladders()).

For each chapter page with ladders, a copy of the page gets a script that, once the page has loaded,
clicks a packet, presses keys and picks an opcode in the menu, the way a reader does (DOM events), and
writes what the page then shows into the page as JSON; `chromium --dump-dom` prints it. Any error the
page raised (an exception, a console.error) is in the JSON too. Then one ladder, moved to the top of
its page with a packet and a field chosen, is screenshot for a person to look at.
"""
import glob
import json
import os
import re
import subprocess
import tempfile

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# First in <head>: keep every error the page raises, from the first script on.
CATCH = """<script>
window.ladderErrors = [];
window.addEventListener("error", function (e) { window.ladderErrors.push(String(e.message)); });
(function () { var original = console.error; console.error = function () {
  window.ladderErrors.push(Array.prototype.join.call(arguments, " ")); original.apply(console, arguments); }; })();
</script>
"""

# Last in <body>: use each ladder, then report. For each ladder: the arrows drawn; a click on the
# middle packet (what the panel shows); a click on a field (the bytes marked); ArrowDown, ArrowUp, End
# of the steps; Enter on the first packet; the opcode menu set to the last packet's opcode.
USE = """<script>
window.addEventListener("load", function () { setTimeout(function () {
  function key(node, name) {
    node.dispatchEvent(new KeyboardEvent("keydown", {key: name, bubbles: true, cancelable: true}));
  }
  function chosen(root) { return Number(root.getAttribute("data-chosen")); }
  var report = [];
  document.querySelectorAll("div.rdma-ladder").forEach(function (root) {
    var name = root.getAttribute("data-ladder");
    var data = (window.rdmaLadders || {})[name];
    var seen = {name: name, data: !!data, arrows: root.querySelectorAll("g.packet").length};
    report.push(seen);
    if (!data || !seen.arrows) { return; }
    try { use(root, data.trace.packets, seen); } catch (e) { seen.failed = String(e); }
  });
  function use(root, packets, seen) {
    // the programs' step lines in their lanes; the box hides them and keeps every arrow
    var steps = root.querySelectorAll("svg text.step");
    seen.steps = Array.prototype.map.call(steps, function (t) {
      return [t.classList.contains("requester") ? "requester" : "responder", t.querySelector("title").textContent]; });
    var box = root.querySelector(".rdma-ladder-steps input");
    if (box) {
      box.checked = false;
      box.dispatchEvent(new Event("change"));
      seen.steps_hidden = [root.querySelectorAll("svg text.step").length, root.querySelectorAll("g.packet").length];
      box.checked = true;
      box.dispatchEvent(new Event("change"));
    }
    var middle = Math.floor((packets.length - 1) / 2);
    var arrows = root.querySelectorAll("g.packet");
    arrows[middle].dispatchEvent(new MouseEvent("click", {bubbles: true}));
    seen.clicked = middle;
    seen.chosen = chosen(root);
    seen.what = (root.querySelector(".rdma-ladder-what") || {}).textContent || "";
    seen.fields = Array.prototype.map.call(root.querySelectorAll("tr.field"), function (row) {
      return [row.getAttribute("data-field"), row.querySelector("td.value").textContent];
    });
    seen.bytes = root.querySelectorAll("pre.rdma-ladder-hex span.byte").length;
    // (the PSN when the packet has one, else the first field whose place is known)
    var places = packets[middle].field_spans || {}, marked = null;
    if (places.BTH && places.BTH.psn) {
      marked = ["BTH.psn", places.BTH.psn];
    }
    Object.keys(places).some(function (header) { return Object.keys(places[header]).some(function (field) {
      marked = marked || [header + "." + field, places[header][field]];
      return true; }); });
    // the frame's last part (a button), its bytes marked
    var parts = root.querySelectorAll(".rdma-ladder-parts button");
    if (parts.length) {
      parts[parts.length - 1].dispatchEvent(new MouseEvent("click", {bubbles: true}));
      seen.part = [parts[parts.length - 1].textContent, Array.prototype.map.call(
        root.querySelectorAll("pre.rdma-ladder-hex span.byte.header"), function (b) { return Number(b.getAttribute("data-offset")); })];
    }
    if (marked) {
      root.querySelector('tr.field[data-field="' + marked[0] + '"]').dispatchEvent(new MouseEvent("click", {bubbles: true}));
      seen.marked = [marked[0], marked[1], Array.prototype.map.call(
        root.querySelectorAll("pre.rdma-ladder-hex span.byte.field"), function (b) { return Number(b.getAttribute("data-offset")); })];
    }
    arrows[middle].focus();
    key(arrows[middle], "ArrowDown");
    seen.down = [chosen(root), document.activeElement === root.querySelectorAll("g.packet")[Math.min(middle + 1, packets.length - 1)]];
    key(document.activeElement, "ArrowUp");
    seen.up = chosen(root);
    arrows[0].focus();
    key(arrows[0], "ArrowUp");
    seen.up_at_first = chosen(root);
    key(arrows[packets.length - 1], "Enter");
    seen.enter_on_last = chosen(root);
    var menu = root.querySelector("select.rdma-ladder-filter");
    seen.filter = packets[packets.length - 1].opcode;
    menu.value = seen.filter;
    menu.dispatchEvent(new Event("change", {bubbles: true}));
    seen.filtered = Array.prototype.map.call(root.querySelectorAll("g.packet"), function (g) { return Number(g.getAttribute("data-index")); });
  }
  var out = document.createElement("pre");
  out.id = "ladder-probe";
  out.textContent = "LADDER-PROBE " + JSON.stringify({ladders: report, errors: window.ladderErrors});
  document.body.appendChild(out);
}, 500); });
</script>
"""

# For the screenshot: the first ladder alone at the top of the page, a packet and a field chosen.
SHOW = """<script>
window.addEventListener("load", function () { setTimeout(function () {
  var root = document.querySelector("div.rdma-ladder");
  var text = document.querySelector("div.textblock") || document.body;
  text.insertBefore(root, text.firstChild);
  var arrows = root.querySelectorAll("g.packet");
  arrows[Math.min(1, arrows.length - 1)].dispatchEvent(new MouseEvent("click", {bubbles: true}));
  var rows = root.querySelectorAll("tr.field");
  for (var i = 0; i < rows.length; i++) {
    if (rows[i].getAttribute("data-field").indexOf("BTH.psn") === 0) { rows[i].dispatchEvent(new MouseEvent("click")); }
  }
}, 300); });
</script>
"""


def pages():
    """{page id: [ladder names]} of the chapters whose pages hold ladders, from their Markdown."""
    found = {}
    for path in sorted(glob.glob(os.path.join(SOURCE, "docs", "tutorial", "[0-9][0-9]-*.md"))):
        text = open(path, encoding="utf-8").read()
        names = re.findall(r'<div class="rdma-ladder" data-ladder="([\w-]+)">', text)
        m = re.match(r"#.*\{#(\w+)\}", text)
        if names and m:
            found[m.group(1)] = names
    return found


def data_of(name):
    """The data file of ladder NAME, as refresh wrote it (JSON between its second line and its last)."""
    lines = open(os.path.join(SOURCE, "docs", "ladders", f"ladder-{name}.js"), encoding="utf-8").read().split("\n")
    return json.loads("\n".join(lines[2:]).rstrip().rstrip(";"))


def probe(html, page, chromium_command):
    """What Chromium shows after the reader's actions on PAGE: ({"ladders": [...], "errors": [...]}, detail)."""
    text = open(os.path.join(html, page + ".html"), encoding="utf-8").read()
    copy = os.path.join(html, "ladder-probe-" + page + ".html")
    with open(copy, "w", encoding="utf-8") as f:
        f.write(text.replace("<head>", "<head>" + CATCH, 1).replace("</body>", USE + "</body>", 1))
    with tempfile.TemporaryDirectory() as profile:
        try:
            p = subprocess.run(chromium_command(profile) + ["--window-size=1280,1000", "--virtual-time-budget=10000",
                                                            "--dump-dom", "file://" + copy],
                               capture_output=True, text=True, timeout=120)
            out, detail = p.stdout, p.stderr[-2000:]
        except subprocess.TimeoutExpired:
            out, detail = "", "chromium did not finish in 120 s"
        finally:
            os.remove(copy)
    m = re.search(r"LADDER-PROBE (\{.*?\})</pre>", out, re.S)
    if not m:
        return None, "the probe wrote nothing\n" + detail
    return json.loads(m.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")), detail


def check_one(check, page, seen):
    """The checks of one ladder, from what the probe saw (SEEN) and its data file."""
    name = seen["name"]
    at = f"{page}.html, ladder {name}"
    check(seen["data"], f"{at}: its data file is loaded")
    if not seen["data"]:
        return
    packets = data_of(name)["trace"]["packets"]
    steps = data_of(name)["trace"].get("steps", [])
    shown = json.dumps(seen)[:1500]
    check(seen["arrows"] == len(packets) > 0, f"{at}: one arrow per packet ({len(packets)})", shown)
    check("failed" not in seen, f"{at}: a reader's clicks and keys run without an error", seen.get("failed", ""))
    if not seen["arrows"] or "failed" in seen:
        return
    check(seen["steps"] == [[s["side"], f"{s['side']}: {s['text']}"] for s in steps],
          f"{at}: the programs' {len(steps)} step lines stand in their lanes, in order", shown)
    if steps:
        check(seen.get("steps_hidden") == [0, len(packets)], f"{at}: the box hides the step lines, not the arrows", shown)
    middle = seen["clicked"]
    p = packets[middle]
    check(seen["chosen"] == middle and p["opcode"] in seen["what"] and f"{p['time_ms']:.3f} ms" in seen["what"],
          f"{at}: a click on packet {middle + 1} chooses it ({p['opcode']})", shown)
    want = [f"{h}.{f}" for h in p["headers"] for f in p["headers"][h]]
    check([f for f, _ in seen["fields"]] == want, f"{at}: its fields are listed, header by header", shown)
    values = dict(seen["fields"])
    bth = p["headers"].get("BTH", {})
    if "psn" in bth:
        check(values.get("BTH.psn", "").startswith(str(bth["psn"])), f"{at}: the PSN shown is the packet's", shown)
    check(seen["bytes"] == len(p.get("bytes", "")) // 2, f"{at}: the hex view holds the frame's bytes", shown)
    if seen.get("marked"):
        field, place, offsets = seen["marked"]
        check(offsets == list(range(place[0], place[0] + place[1])), f"{at}: a click on {field} marks its bytes", shown)
    if p.get("spans"):
        part = p["spans"][-1]
        check(seen.get("part") == [f"{part['header']} {part['length']}", list(range(part["offset"], part["offset"] + part["length"]))],
              f"{at}: a click on the frame's last part ({part['header']}) marks its bytes", shown)
    last = len(packets) - 1
    check(seen["down"] == [min(middle + 1, last), True] and seen["up"] == middle and seen["up_at_first"] == 0,
          f"{at}: ArrowDown and ArrowUp step to the next and the previous packet, and move the focus", shown)
    check(seen["enter_on_last"] == last, f"{at}: Enter chooses the focused packet", shown)
    check(seen["filtered"] == [i for i, q in enumerate(packets) if q["opcode"] == seen["filter"]],
          f"{at}: the menu shows only the {seen['filter']} packets", shown)


def check_ladders(html, check, chromium_command, screenshot, shots):
    """Every ladder of every chapter page, used in Chromium; one screenshot into SHOTS."""
    found = pages()
    check(bool(found), "the tutorial has interactive ladders")
    check(all(data_of(name)["trace"].get("steps") for names in found.values() for name in names),
          "every ladder has its programs' step lines (docs/ladders/refresh)")
    for page, names in found.items():
        seen, detail = probe(html, page, chromium_command)
        check(seen is not None, f"{page}.html: the ladders' probe ran in Chromium", detail)
        if seen is None:
            continue
        check(not seen["errors"], f"{page}.html: no error in the console", "\n".join(seen["errors"]))
        check([s["name"] for s in seen["ladders"]] == names, f"{page}.html shows its ladders {names}",
              json.dumps(seen["ladders"])[:500])
        for s in seen["ladders"]:
            check_one(check, page, s)
    if found:
        page = next(iter(found))
        copy = "ladder-shot-" + page + ".html"
        text = open(os.path.join(html, page + ".html"), encoding="utf-8").read()
        with open(os.path.join(html, copy), "w", encoding="utf-8") as f:
            f.write(text.replace("</body>", SHOW + "</body>", 1))
        screenshot(html, copy, os.path.join(shots, f"ladder-{page}.png"), 1100)
        os.remove(os.path.join(html, copy))
