/* ladder.js: the tutorial's packet ladders, drawn from the captures of the tested pairs.
 *
 * A chapter's "On the wire" section holds, under its text ladder, one line of HTML (a reader of the
 * Markdown on a forge sees nothing of it):
 *
 *     <div class="rdma-ladder" data-ladder="02-rdma-write-1"></div>
 *
 * Every page of the site loads this script (the header docs/meson.build makes for Doxygen). Once the
 * page is loaded it loads the data of each such ladder from beside itself (ladder-02-rdma-write-1.js:
 * docs/ladders/refresh writes it) and draws it: the two hosts as columns, one arrow
 * per packet with its time and opcode. Choosing an arrow (a click; Enter or Space on a focused arrow;
 * the arrow keys step to the next or the previous packet) shows that packet's headers field by field,
 * and the frame's bytes, where the chosen header or field is highlighted. A menu shows only the packets
 * of one opcode. Between the arrows, in each host's lane, the step lines its program printed before
 * the next packet (when the capture timed them: trace/README.md); a box hides them. Plain JavaScript
 * and SVG, nothing loaded from anywhere: the site works from a file.
 */
(function () {
  "use strict";
  if (window.rdmaLadderViewer) {
    return; // (a page with two ladders includes this script twice)
  }

  var SVG = "http://www.w3.org/2000/svg";
  var ROW = 30;          // px between two arrows
  var STEP_ROW = 18;     // px of a program's step line between them
  var STEP_CHARS = 58;   // the most of a step line that fits in a lane (all of it in its tooltip)
  var TOP = 54;          // px above the first arrow: the hosts' names
  var LEFT = 240;        // x of the requester's column
  var RIGHT = 680;       // x of the responder's column
  var WIDTH = 800;

  // What a field means, in a line: the header's name, a dot, the field's name as the data gives it
  // (tshark's field name without the header's prefix; trace/README.md, "The ladder as data").
  var MEANINGS = {
    "IP.src": "the sender's IP address (RoCE v2 routes like any UDP datagram)",
    "IP.dst": "the receiver's IP address, or a multicast group's",
    "IP.dsfield_dscp": "DSCP: the traffic class a RoCE network maps to a lossless priority",
    "IP.dsfield_ecn": "ECN: a congested switch marks it; the receiver then sends a CNP (DCQCN)",
    "IP.ttl": "hops left before a router drops the packet",
    "UDP.srcport": "chosen by the sender per QP, so that switches spread flows over paths (ECMP)",
    "UDP.dstport": "4791: the port of RoCE v2",
    "BTH.opcode": "what the packet is: the transport (RC, UD) and the operation",
    "BTH.se": "solicited event: wake a receiver that waits for solicited completions only",
    "BTH.m": "migration state (automatic path migration)",
    "BTH.padcnt": "pad bytes after the payload, to a multiple of 4",
    "BTH.tver": "transport header version: 0",
    "BTH.p_key": "partition key: the two QPs must share the partition (0xffff: the default one)",
    "BTH.destqp": "the destination QP number, on the receiving side",
    "BTH.a": "acknowledge request: the responder is asked to answer with an ACK",
    "BTH.psn": "packet sequence number: a resent packet has the same one",
    "RETH.va": "the virtual address in the responder's memory where the WRITE or READ goes",
    "RETH.r_key": "the remote key that opens that memory (the MR's rkey)",
    "RETH.dmalen": "bytes in the whole WRITE or READ, over all its packets",
    "AETH.syndrome": "ACK (low bits: credits), RNR NAK (low bits: the timer) or NAK (low bits: why)",
    "AETH.msn": "message sequence number: how many messages the responder has completed",
    "AtomicETH.swapdt": "the value to add (FetchAdd) or to write (CmpSwap)",
    "AtomicETH.cmpdt": "CmpSwap: write only if the memory holds this value",
    "AtomicAckETH.origremdt": "the value the responder's memory held before the atomic",
    "ImmDt.value": "32 bits that arrive in the receiver's completion (wc.imm_data), not in its memory",
    "DETH.q_key": "the key the destination QP must hold, or it drops the datagram",
    "DETH.srcqp": "the QP that sent the datagram (the receiver's wc.src_qp)",
    "MAD.mgmtclass": "management class: 7 is the communication manager (the CM)",
    "MAD.method": "what the MAD does: 3 sends a message",
    "MAD.attributeid": "which CM message: 0x10 REQ, 0x13 REP, 0x14 RTU, 0x12 REJ, 0x15 DREQ, 0x16 DREP",
    "MAD.transactionid": "pairs a message with its answer",
    "CM.req_localqpn": "the connecting side's QP number",
    "CM.req_startpsn": "the first PSN the connecting side will send",
    "CM.req_serviceid_dport": "the port the server listens on (rdma_listen)",
    "CM.req_responderres": "READs and atomics the connecting side will answer at once",
    "CM.req_initdepth": "READs and atomics the connecting side will have outstanding",
    "CM.req_retrcount": "retry_cnt: how often a request is sent again before it fails",
    "CM.req_rnrretrcount": "rnr_retry: how often after an RNR NAK (7: forever)",
    "CM.rep_localqpn": "the server's QP number",
    "CM.rep_startpsn": "the first PSN the server will send",
    "CM.rep_respres": "READs and atomics the server will answer at once",
    "CM.rep_initdepth": "READs and atomics the server will have outstanding",
    "CM.rej_reason": "why the connection was refused (8: nobody listens on that port)",
    "ICRC.crc": "invariant CRC over the fields no switch changes",
    "IGMP.type": "the kernel's report: 0x16 joined, 0x17 left, 0x22 IGMPv3 report",
    "IGMP.maddr": "the multicast group",
    "IGMP.record_type": "IGMPv3: whether the host now listens to the group or left it",
    "TCP.srcport": "the sender's TCP port",
    "TCP.dstport": "the receiver's TCP port",
    "TCP.seq": "sequence number (from 0 at the SYN): the first byte this segment carries",
    "TCP.ack": "the next byte the sender expects: everything before has arrived",
    "TCP.len": "bytes of data in this segment",
    "TCP.window_size": "bytes the sender may still receive",
    "TCP.flags_syn": "SYN: opens a connection",
    "TCP.flags_ack": "the ack number is valid",
    "TCP.flags_fin": "FIN: the sender has no more to send",
    "TCP.flags_reset": "RST: the connection is aborted",
    "MPA.key_req": "\"MPA ID Req Frame\": the bytes that open an MPA Request",
    "MPA.key_rep": "\"MPA ID Rep Frame\": the bytes that open an MPA Reply",
    "MPA.rev": "MPA revision (2: the depths IRD and ORD ride in the private data)",
    "MPA.marker_flag": "markers every 512 bytes of the stream (siw does not ask for them)",
    "MPA.crc_flag": "a CRC32c after every frame",
    "MPA.rej_flag": "the reply refuses the connection",
    "MPA.pdlength": "bytes of private data (the CM's, and MPA v2's IRD and ORD)",
    "MPA.privatedata": "what rdma_connect() and rdma_accept() hand over",
    "MPA.ulpdulength": "bytes of this frame's DDP segment",
    "MPA.crc": "the frame's CRC32c",
    "DDP.tagged_flag": "1: placed at an STag and offset; 0: into a buffer of a receive queue",
    "DDP.last_flag": "the last segment of the message",
    "DDP.stag": "steering tag: iWARP's rkey",
    "DDP.tagged_offset": "where in the STag's memory the segment goes",
    "DDP.qn": "queue number: 0 Sends, 1 Read Requests, 2 Terminate",
    "DDP.msn": "message sequence number on that queue",
    "DDP.mo": "message offset: where the segment lies in its message",
    "DDP.dv": "DDP version",
    "RDMAP.opcode": "0 Write, 1 Read Request, 2 Read Response, 3 Send, 7 Terminate",
    "RDMAP.version": "RDMAP version",
    "RDMAP.sinkstag": "the requester's STag the Read Response fills",
    "RDMAP.sinkto": "the offset in it",
    "RDMAP.rdmardsz": "bytes to read",
    "RDMAP.srcstag": "the responder's STag to read from",
    "RDMAP.srcto": "the offset in it"
  };

  function svg(name, attrs, parent) {
    var node = document.createElementNS(SVG, name);
    Object.keys(attrs).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    parent.appendChild(node);
    return node;
  }

  function html(name, className, parent, text) {
    var node = document.createElement(name);
    if (className) {
      node.className = className;
    }
    if (text !== undefined) {
      node.textContent = text;
    }
    parent.appendChild(node);
    return node;
  }

  // A number as the text ladder writes it where it matters (hex), with its decimal value beside.
  function shown(value) {
    if (typeof value === "number" && Number.isInteger(value) && value > 9) {
      return value + " (0x" + value.toString(16) + ")";
    }
    return String(value);
  }

  // The packets' opcodes, each once, in the order they first appear.
  function opcodes(packets) {
    var seen = [];
    packets.forEach(function (p) {
      if (seen.indexOf(p.opcode) < 0) {
        seen.push(p.opcode);
      }
    });
    return seen;
  }

  function Ladder(root, data) {
    this.root = root;
    this.data = data;
    this.packets = data.trace.packets;
    this.visible = this.packets.map(function (p, i) { return i; });
    this.chosen = -1;
    this.build();
  }

  Ladder.prototype.build = function () {
    var self = this;
    var scenario = this.data.trace.scenario;
    this.root.textContent = "";
    var bar = html("div", "rdma-ladder-bar", this.root);
    var title = html("div", "rdma-ladder-title", bar, "The packets of " + this.data.command);
    html("div", "rdma-ladder-note", title, "from a capture of their own: times, addresses, keys and PSNs " +
         "differ from the text above");
    var label = html("label", "", bar, "show ");
    var menu = html("select", "rdma-ladder-filter", label);
    menu.setAttribute("aria-label", "show only the packets of one opcode");
    html("option", "", menu, "every packet (" + this.packets.length + ")").value = "";
    opcodes(this.packets).forEach(function (name) {
      var count = self.packets.filter(function (p) { return p.opcode === name; }).length;
      html("option", "", menu, name + " (" + count + ")").value = name;
    });
    menu.addEventListener("change", function () { self.filter(menu.value); });
    this.showSteps = (this.data.trace.steps || []).length > 0;
    if (this.showSteps) {
      var box = html("label", "rdma-ladder-steps", bar, "");
      var check = html("input", "", box);
      check.type = "checkbox";
      check.checked = true;
      box.appendChild(document.createTextNode(" the programs' steps"));
      check.addEventListener("change", function () { self.showSteps = check.checked; self.draw(); });
    }

    var scroll = html("div", "rdma-ladder-scroll", this.root); // (a long ladder scrolls in its box)
    this.figure = svg("svg", {"class": "rdma-ladder-svg", role: "list",
                              "aria-label": "packets between " + scenario.hosts.requester.program +
                                            " and " + scenario.hosts.responder.program}, scroll);
    this.fields = html("div", "rdma-ladder-fields", this.root,
                       "Choose a packet (click it, or Tab to it and press Enter; the arrow keys step).");
    this.draw();
  };

  // What the figure shows, top to bottom: {packet: index} for each packet shown, and before it
  // {step: ...} for each step line that came before it and after the packet shown above it (the data's
  // "before" names the frame of the first packet after the step; none: after the last packet).
  Ladder.prototype.rows = function () {
    var self = this;
    var steps = this.showSteps ? this.data.trace.steps : [];
    var rows = [];
    var next = 0;
    this.visible.forEach(function (index) {
      var frame = self.packets[index].frame;
      while (next < steps.length && steps[next].before !== undefined &&
             (frame === undefined || steps[next].before <= frame)) {
        rows.push({step: steps[next++]});
      }
      rows.push({packet: index});
    });
    return rows.concat(steps.slice(next).map(function (step) { return {step: step}; }));
  };

  // A step line in its program's lane: the requester's from its column rightwards, the responder's
  // from its column leftwards; a long one cut short, all of it in its tooltip.
  function drawStep(figure, step, y) {
    var requester = step.side === "requester";
    var text = step.text.length > STEP_CHARS ? step.text.slice(0, STEP_CHARS - 1) + "\u2026" : step.text;
    var line = svg("text", {x: requester ? LEFT + 8 : RIGHT - 8, y: y, "class": "step " + step.side}, figure);
    line.textContent = text;
    svg("title", {}, line).textContent = step.side + ": " + step.text;
  }

  Ladder.prototype.draw = function () {
    var self = this;
    var hosts = this.data.trace.scenario.hosts;
    var figure = this.figure;
    var rows = this.rows();
    var height = TOP + 20 + rows.reduce(function (sum, row) { return sum + (row.step ? STEP_ROW : ROW); }, 0);
    figure.textContent = "";
    figure.setAttribute("viewBox", "0 0 " + WIDTH + " " + height);
    figure.setAttribute("width", WIDTH);
    figure.setAttribute("height", height);
    [[LEFT, hosts.requester], [RIGHT, hosts.responder]].forEach(function (side) {
      var name = svg("text", {x: side[0], y: 18, "class": "host"}, figure);
      name.textContent = side[1].program;
      var address = svg("text", {x: side[0], y: 34, "class": "address"}, figure);
      address.textContent = side[1].address;
      svg("line", {x1: side[0], y1: 42, x2: side[0], y2: height - 6, "class": "column"}, figure);
    });
    var time = svg("text", {x: 8, y: 34, "class": "address time"}, figure);
    time.textContent = "time";
    this.arrows = [];
    var top = TOP;
    rows.forEach(function (row) {
      if (row.step) {
        drawStep(figure, row.step, top + 12);
        top += STEP_ROW;
        return;
      }
      var index = row.packet;
      var p = self.packets[index];
      var y = top + 16;
      top += ROW;
      var forward = p.from === "requester";
      var arrow = svg("g", {"class": "packet", tabindex: "0", role: "listitem", "data-index": index,
                            "aria-label": p.time_ms.toFixed(3) + " ms, " + p.from + " to " + p.to + ": " + p.opcode},
                      figure);
      svg("rect", {x: 0, y: y - 19, width: WIDTH, height: ROW, "class": "hit"}, arrow);
      var when = svg("text", {x: 8, y: y + 4, "class": "time"}, arrow);
      when.textContent = p.time_ms.toFixed(3) + " ms";
      var from = forward ? LEFT : RIGHT;
      var to = forward ? RIGHT : LEFT;
      var tip = forward ? to - 9 : to + 9;
      svg("line", {x1: from, y1: y, x2: tip, y2: y, "class": "shaft"}, arrow);
      svg("path", {d: "M" + to + "," + y + " L" + tip + "," + (y - 5) + " L" + tip + "," + (y + 5) + " Z",
                   "class": "head"}, arrow);
      var name = svg("text", {x: (LEFT + RIGHT) / 2, y: y - 5, "class": "opcode"}, arrow);
      name.textContent = p.opcode + (p.psn !== undefined ? "  PSN 0x" + p.psn.toString(16) : "");
      arrow.addEventListener("click", function () { self.choose(index); });
      arrow.addEventListener("keydown", function (event) { self.key(event, index); });
      self.arrows[index] = arrow;
    });
    if (this.chosen >= 0 && this.arrows[this.chosen]) {
      this.arrows[this.chosen].classList.add("chosen");
    }
  };

  Ladder.prototype.filter = function (opcode) {
    var self = this;
    this.visible = [];
    this.packets.forEach(function (p, i) {
      if (!opcode || p.opcode === opcode) {
        self.visible.push(i);
      }
    });
    this.draw();
  };

  // Enter and Space choose the focused packet; the arrow keys choose the next or the previous one shown.
  Ladder.prototype.key = function (event, index) {
    var row = this.visible.indexOf(index);
    var next = null;
    if (event.key === "Enter" || event.key === " ") {
      next = index;
    } else if (event.key === "ArrowDown" || event.key === "ArrowRight") {
      next = this.visible[Math.min(row + 1, this.visible.length - 1)];
    } else if (event.key === "ArrowUp" || event.key === "ArrowLeft") {
      next = this.visible[Math.max(row - 1, 0)];
    }
    if (next !== null) {
      event.preventDefault();
      this.choose(next);
      this.arrows[next].focus();
    }
  };

  Ladder.prototype.choose = function (index) {
    var self = this;
    var p = this.packets[index];
    if (this.chosen >= 0 && this.arrows[this.chosen]) {
      this.arrows[this.chosen].classList.remove("chosen");
    }
    this.chosen = index;
    this.arrows[index].classList.add("chosen");
    this.root.setAttribute("data-chosen", index);
    var box = this.fields;
    box.textContent = "";
    html("div", "rdma-ladder-what", box, "Packet " + (index + 1) + " of " + this.packets.length + ": " +
         p.opcode + ", " + p.from + " \u2192 " + p.to + ", " + p.time_ms.toFixed(3) + " ms, " + p.transport);
    html("code", "rdma-ladder-line", box, p.line.trim());
    // the frame's parts in the order of the wire, Ethernet to ICRC: a button marks that part's bytes
    var parts = html("div", "rdma-ladder-parts", box);
    (p.spans || []).forEach(function (span) {
      var button = html("button", "", parts, span.header + " " + span.length);
      button.type = "button";
      button.title = "mark the " + span.header + " bytes";
      button.addEventListener("click", function () { self.mark(p, span, null, ""); });
    });
    this.place = html("div", "rdma-ladder-place", box);
    this.hex = html("pre", "rdma-ladder-hex", box);
    var table = html("table", "rdma-ladder-table", box);
    var spans = {};
    (p.spans || []).forEach(function (s) { spans[s.header] = s; });
    Object.keys(p.headers).forEach(function (header) {
      var head = html("tr", "header", table);
      var cell = html("th", "", head, header);
      cell.colSpan = 3;
      head.addEventListener("click", function () { self.mark(p, spans[header], null, ""); });
      var places = (p.field_spans || {})[header] || {};
      Object.keys(p.headers[header]).forEach(function (field) {
        var row = html("tr", "field", table);
        row.tabIndex = 0;
        row.setAttribute("data-field", header + "." + field);
        html("td", "name", row, field);
        html("td", "value", row, shown(p.headers[header][field]));
        html("td", "meaning", row, MEANINGS[header + "." + field] || "");
        var place = places[field];
        var show = function () { self.mark(p, spans[header], place, header + "." + field); };
        row.addEventListener("click", show);
        row.addEventListener("focus", show);
      });
    });
    this.mark(p, null, null, "");
  };

  // The frame's bytes, 16 a line; HEADER's bytes ({header, offset, length}) shaded, those of the field
  // NAME (FIELD: [offset, length, bitmask]) marked, and said in words above them.
  Ladder.prototype.mark = function (p, header, field, name) {
    var hex = this.hex;
    hex.textContent = "";
    this.place.textContent = where(p, header, field, name);
    if (!p.bytes) {
      hex.textContent = "(the capture kept no bytes for this packet)";
      return;
    }
    for (var at = 0; at < p.bytes.length / 2; at++) {
      if (at % 16 === 0) {
        hex.appendChild(document.createTextNode((at ? "\n" : "") + ("000" + at.toString(16)).slice(-4) + "  "));
      }
      var kind = "byte";
      if (field && at >= field[0] && at < field[0] + field[1]) {
        kind = "byte field";
      } else if (header && at >= header.offset && at < header.offset + header.length) {
        kind = "byte header";
      }
      html("span", kind, hex, p.bytes.substr(at * 2, 2)).setAttribute("data-offset", at);
      hex.appendChild(document.createTextNode(at % 16 === 7 ? "  " : " "));
    }
    var first = hex.querySelector("span.byte.field") || hex.querySelector("span.byte.header");
    if (first) {
      hex.scrollTop = first.offsetTop - 20; // (a long frame scrolls inside its box)
    }
  };

  // The line above the bytes: where the chosen field or header lies.
  function where(p, header, field, name) {
    if (field) {
      var bits = field[2] ? " (the bits 0x" + field[2].toString(16) + " of them)" : "";
      return name + ": bytes " + field[0] + " to " + (field[0] + field[1] - 1) + bits;
    }
    if (header) {
      return "the " + header.header + " header: bytes " + header.offset + " to " + (header.offset + header.length - 1);
    }
    if (!p.bytes) {
      return "";
    }
    return "the frame's " + p.bytes.length / 2 + " bytes, from the Ethernet header on (choose a field to see where it lies)";
  }

  // Where the data files lie: beside this script.
  var HERE = (document.currentScript && document.currentScript.src || "").replace(/[^\/]*$/, "");

  function drawOne(root) {
    var data = (window.rdmaLadders || {})[root.getAttribute("data-ladder")];
    if (!data) {
      root.textContent = "(no data for the ladder " + root.getAttribute("data-ladder") + ": docs/ladders/refresh)";
    } else if (!root.ladder) {
      root.ladder = new Ladder(root, data);
    }
  }

  // Each ladder of the page: its data file loaded (once; a page may show one ladder twice), then drawn.
  function drawAll() {
    Array.prototype.forEach.call(document.querySelectorAll("div.rdma-ladder"), function (root) {
      var name = root.getAttribute("data-ladder") || "";
      if ((window.rdmaLadders || {})[name] || !/^[0-9A-Za-z-]+$/.test(name)) {
        drawOne(root);
        return;
      }
      var id = "rdma-ladder-data-" + name;
      var script = document.getElementById(id);
      if (!script) {
        script = document.createElement("script");
        script.id = id;
        script.src = HERE + "ladder-" + name + ".js";
        document.head.appendChild(script);
      }
      script.addEventListener("load", function () { drawOne(root); });
      script.addEventListener("error", function () { drawOne(root); });
    });
  }

  window.rdmaLadderViewer = {draw: drawAll};
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", drawAll);
  } else {
    drawAll();
  }
})();
