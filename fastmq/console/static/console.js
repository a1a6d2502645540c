// fastmq console: one page, a view per hash route, each refreshed by fetching JSON on a timer.
// Every value from the cluster is put in the page as text (textContent / createTextNode): a
// message body or key holding markup shows as that markup, never runs.
"use strict";
(function () {
  var session = null, timer = null, generation = 0;
  var main = document.getElementById("main"), statusEl = document.getElementById("status");

  function h(tag, attrs) {
    var n = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      var v = attrs[k];
      if (v === null || v === undefined || v === false) { return; }
      if (k.slice(0, 2) === "on") { n.addEventListener(k.slice(2), v); }
      else if (k === "text") { n.textContent = String(v); }
      else { n.setAttribute(k, String(v)); }
    });
    for (var i = 2; i < arguments.length; i++) { add(n, arguments[i]); }
    return n;
  }
  function add(n, c) {
    if (c === null || c === undefined || c === false) { return; }
    if (Array.isArray(c)) { c.forEach(function (x) { add(n, x); }); return; }
    n.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
  }
  function clear(n) { while (n.firstChild) { n.removeChild(n.firstChild); } return n; }
  function when(ms) { return ms > 0 ? new Date(ms).toLocaleString() : "-"; }
  function num(v, digits) { return typeof v === "number" ? v.toFixed(digits || 0) : (v === undefined || v === null ? "" : String(v)); }
  function table(cls, head, rows) {
    return h("table", { "class": cls },
      h("thead", null, h("tr", null, head.map(function (x) { return h("th", { text: x }); }))),
      h("tbody", null, rows.length ? rows.map(function (r) {
        return h("tr", null, r.map(function (c) {
          if (c && c.nodeType) { return h("td", null, c); }
          return h("td", { "class": typeof c === "number" ? "num" : null, text: c === null || c === undefined ? "" : c });
        }));
      }) : h("tr", null, h("td", { colspan: head.length, "class": "note", text: "none" }))));
  }
  function link(href, text) { return h("a", { href: href, text: text }); }
  function enc(s) { return encodeURIComponent(s); }

  function api(path) {
    return fetch(path, { headers: { Accept: "application/json" }, credentials: "same-origin" }).then(answer);
  }
  function post(path, body, method) {
    return fetch(path, { method: method || "POST", credentials: "same-origin", body: JSON.stringify(body),
      headers: { "Content-Type": "application/json", "X-Fastmq-Token": session.token } }).then(answer);
  }
  function answer(r) {
    return r.json().then(function (j) {
      if (!r.ok) { throw new Error(j && j.error ? j.error : ("HTTP " + r.status)); }
      return j;
    });
  }
  function status(text, bad) {
    statusEl.textContent = text;
    statusEl.className = "status" + (bad ? " bad" : "");
  }
  function showError(where, e) { clear(where); where.appendChild(h("p", { "class": "error", text: e.message || String(e) })); }

  // ------------------------------------------------------------------ pages

  var pages = {};

  pages.cluster = function (root) {
    root.appendChild(h("h1", { text: "Cluster and brokers" }));
    var data = root.appendChild(h("div", { id: "data" }));
    return function () {
      return api("/api/cluster").then(function (j) {
        var up = j.brokers.filter(function (b) { return b.up; });
        var sum = function (k) { return up.reduce(function (a, b) { return a + (b[k] || 0); }, 0); };
        clear(data);
        data.appendChild(h("div", { "class": "cards" },
          h("div", { "class": "card" }, h("b", { id: "brokers-up", text: up.length + " / " + j.brokers.length }), "brokers answering"),
          h("div", { "class": "card" }, h("b", { text: sum("inTps").toFixed(1) }), "messages in per second"),
          h("div", { "class": "card" }, h("b", { text: sum("outTps").toFixed(1) }), "messages out per second")));
        data.appendChild(table("brokers", ["Cluster", "Broker", "BID", "Address", "Health", "Version", "In TPS", "Out TPS",
          "Disk used", "Put today", "Got today", "Up for", ""], j.brokers.map(function (b) {
          var disk = b.up ? h("span", { "class": "nowrap" }, h("span", { "class": "bar" + (b.diskRatio > 0.75 ? " high" : "") },
            h("span", { style: null, "data-ratio": b.diskRatio })), (b.diskRatio * 100).toFixed(1) + "%") : "";
          return [b.cluster, b.brokerName, b.brokerId, b.addr,
            h("span", { "class": b.up ? "up" : "down", text: b.up ? "up" : "unreachable" }),
            b.version || "", b.up ? num(b.inTps, 1) : "", b.up ? num(b.outTps, 1) : "", disk,
            b.up ? b.putToday : "", b.up ? b.getToday : "", b.runtime || "", link("#/config/" + enc(b.addr), "config")];
        })));
        // the bar widths: set through the DOM (the page's policy allows no inline style text)
        Array.prototype.forEach.call(data.querySelectorAll(".bar > span"), function (s) {
          s.style.width = Math.min(100, Math.max(0, Number(s.getAttribute("data-ratio")) * 100)) + "%";
        });
      });
    };
  };

  var topicFilter = { text: "", kind: "normal" };
  pages.topics = function (root) {
    root.appendChild(h("h1", { text: "Topics" }));
    var data;
    var input = h("input", { type: "search", placeholder: "filter", value: topicFilter.text,
      oninput: function () { topicFilter.text = input.value; draw(); } });
    var kind = h("select", { onchange: function () { topicFilter.kind = kind.value; draw(); } },
      ["normal", "retry", "dlq", "system", "all"].map(function (k) { return h("option", { value: k, text: k, selected: k === topicFilter.kind }); }));
    root.appendChild(h("div", { "class": "inline" }, input, kind));
    data = root.appendChild(h("div", { id: "data" }));
    root.appendChild(h("h2", { text: "Create or update a topic" }));
    topicForm(root.appendChild(h("div", { "class": "topic-create" })), null);
    var last = null;
    function draw() {
      if (!last) { return; }
      var rows = last.topics.filter(function (t) {
        return (topicFilter.kind === "all" || t.kind === topicFilter.kind) && t.topic.toLowerCase().indexOf(topicFilter.text.toLowerCase()) >= 0;
      });
      clear(data).appendChild(table("topics", ["Topic", "Kind"], rows.map(function (t) {
        return [link("#/topic/" + enc(t.topic), t.topic), t.kind];
      })));
    }
    return function () { return api("/api/topics").then(function (j) { last = j; draw(); }); };
  };

  pages.topic = function (root, name) {
    root.appendChild(h("h1", null, "Topic ", h("span", { "class": "name", text: name })));
    var data = root.appendChild(h("div", { id: "data" }));
    var writes = root.appendChild(h("div", { "class": "topic-writes" }));
    return function () {
      return api("/api/topics/" + enc(name)).then(function (j) {
        if (!writes.firstChild) {  // once: a refresh keeps what the user typed
          var q = (j.route.queueDatas || [])[0] || {};
          writes.appendChild(h("h2", { text: "Update" }));
          topicForm(writes, { topic: name, read: q.readQueueNums || 8, write: q.writeQueueNums || 8, perm: q.perm || 6 });
          writes.appendChild(h("h2", { text: "Delete" }));
          deleteForm(writes, "topic", name, "/api/topics/" + enc(name), false);
        }
        clear(data);
        data.appendChild(h("div", { "class": "cards" },
          h("div", { "class": "card" }, h("b", { text: j.messages }), "messages stored"),
          h("div", { "class": "card" }, h("b", { text: j.queues.length }), "queues"),
          h("div", { "class": "card" }, h("b", { text: j.kind }), "kind")));
        data.appendChild(h("h2", { text: "Route" }));
        var addrs = {};
        (j.route.brokerDatas || []).forEach(function (b) { addrs[b.brokerName] = b.brokerAddrs; });
        data.appendChild(table("route", ["Broker", "Addresses", "Read queues", "Write queues", "Perm"],
          (j.route.queueDatas || []).map(function (q) {
            var a = addrs[q.brokerName] || {};
            return [q.brokerName, Object.keys(a).map(function (k) { return k + ": " + a[k]; }).join(", "),
              q.readQueueNums, q.writeQueueNums, q.perm];
          })));
        data.appendChild(h("h2", { text: "Queues" }));
        data.appendChild(table("queues", ["Broker", "Queue", "Min offset", "Max offset", "Messages", "Last stored"],
          j.queues.map(function (q) {
            return [q.brokerName, q.queueId, q.minOffset, q.maxOffset, q.maxOffset - q.minOffset, when(q.lastUpdateTimestamp)];
          })));
      });
    };
  };

  pages.groups = function (root) {
    root.appendChild(h("h1", { text: "Consumer groups" }));
    var data = root.appendChild(h("div", { id: "data" }));
    root.appendChild(h("h2", { text: "Create or update a group" }));
    groupForm(root.appendChild(h("div", { "class": "group-create" })));
    return function () {
      return api("/api/groups").then(function (j) {
        clear(data).appendChild(table("groups", ["Group", "Clients", "Type", "Model", "Consume TPS", "Lag (messages)"],
          j.groups.map(function (g) {
            return [link("#/group/" + enc(g.group), g.group),
              g.count ? g.count : h("span", { "class": "down", text: "offline" }),
              g.consumeType === "CONSUME_PASSIVELY" ? "push" : (g.consumeType === "CONSUME_ACTIVELY" ? "pull" : ""),
              g.messageModel || "", g.consumeTps, g.diffTotal > 0 ? h("span", { "class": "lag", text: g.diffTotal }) : g.diffTotal];
          })));
        data.appendChild(h("p", { "class": "note", text: "Lag sampled at " + new Date(j.time).toLocaleTimeString() }));
      });
    };
  };

  function confirmPanel(where, what, need, button, act) {
    // an explicit second step: the write is sent only once the confirmation text matches
    clear(where);
    var input = h("input", { "class": "confirm-input", placeholder: need, size: Math.min(60, need.length + 4),
      oninput: function () { go.disabled = input.value !== need; } });
    var out = h("div", { "class": "result" });
    var go = h("button", { "class": "danger confirm-go", disabled: true, text: button, onclick: function () {
      go.disabled = true;
      act(input.value).then(function (r) { clear(out).appendChild(h("pre", { "class": "body", text: JSON.stringify(r, null, 2) })); },
        function (e) { showError(out, e); });
    } });
    where.appendChild(h("div", { "class": "confirm" }, h("p", null, what), h("p", null, "Type ", h("code", { text: need }), " to confirm."),
      h("div", { "class": "inline" }, input, go,
        h("button", { text: "Cancel", onclick: function () { clear(where); } })), out));
  }


  // ------------------------------------------------------------------ writes: topics and groups

  function clusterSelect(cls) {
    // the clusters the NameServer knows, for a write's target
    var sel = h("select", { "class": cls });
    api("/api/cluster").then(function (j) {
      var seen = {};
      j.brokers.forEach(function (b) {
        if (!seen[b.cluster]) { seen[b.cluster] = 1; sel.appendChild(h("option", { value: b.cluster, text: b.cluster })); }
      });
    }, function () {});
    return sel;
  }
  function field(label, input) { return h("label", { "class": "field" }, label, input); }
  function writeButton(cls, text, onclick) {
    return h("button", { "class": cls, text: text, disabled: !session.writes, title: session.writesWhy, onclick: onclick });
  }

  // create or update a topic (preset: the topic's current route, on its own page)
  function topicForm(where, preset) {
    var name = h("input", { "class": "topic-name", placeholder: "topic", value: preset ? preset.topic : "", readonly: !!preset });
    var cluster = clusterSelect("topic-cluster");
    var rq = h("input", { "class": "topic-read", type: "number", min: 1, value: preset ? preset.read : 8, size: 4 });
    var wq = h("input", { "class": "topic-write", type: "number", min: 1, value: preset ? preset.write : 8, size: 4 });
    var perm = h("select", { "class": "topic-perm" }, [["6", "6 read and write"], ["4", "4 read only"], ["2", "2 write only"]].map(function (p) {
      return h("option", { value: p[0], text: p[1], selected: preset ? String(preset.perm) === p[0] : p[0] === "6" });
    }));
    var order = h("input", { type: "checkbox", "class": "topic-order" });
    var panel = h("div");
    where.appendChild(h("div", { "class": "inline write-form" }, field("Topic", name), field("Cluster", cluster),
      field("Read queues", rq), field("Write queues", wq), field("Perm", perm), field("Ordered", order),
      writeButton("topic-save", preset ? "Update..." : "Create / update...", function () {
        var t = name.value.trim();
        if (!t) { showError(panel, new Error("name the topic")); return; }
        var body = { topic: t, cluster: cluster.value, readQueueNums: Number(rq.value), writeQueueNums: Number(wq.value),
          perm: Number(perm.value), order: order.checked };
        confirmPanel(panel, "Create or update topic " + t + " on every master of cluster " + cluster.value + " with " +
          body.readQueueNums + " read / " + body.writeQueueNums + " write queues, perm " + body.perm + ".", t, "Save topic",
          function (typed) { body.confirm = typed; return post("/api/topics", body); });
      })));
    where.appendChild(panel);
  }

  function deleteForm(where, what, name, path, extra) {
    // delete a topic or group: the cluster it goes from, then the name typed to confirm
    var cluster = clusterSelect("delete-cluster");
    var offsets = extra ? h("input", { type: "checkbox", "class": "delete-offsets" }) : null;
    var panel = h("div");
    where.appendChild(h("div", { "class": "inline write-form" }, field("Cluster", cluster),
      offsets ? field("Remove its offsets too", offsets) : null,
      writeButton("delete-open danger", "Delete " + what + "...", function () {
        confirmPanel(panel, "Delete " + what + " " + name + " from every master of cluster " + cluster.value + ".", name,
          "Delete " + what, function (typed) {
            var body = { cluster: cluster.value, confirm: typed };
            if (offsets) { body.removeOffset = offsets.checked; }
            return post(path, body, "DELETE");
          });
      })));
    where.appendChild(panel);
  }

  function groupForm(where) {
    // SubscriptionGroupConfig's settings, 4.9.8's defaults
    var name = h("input", { "class": "group-name", placeholder: "consumer group" });
    var cluster = clusterSelect("group-cluster");
    var enable = h("input", { type: "checkbox", "class": "group-enable", checked: true });
    var broadcast = h("input", { type: "checkbox", "class": "group-broadcast", checked: true });
    var retryQ = h("input", { type: "number", "class": "group-retry-queues", min: 0, value: 1, size: 3 });
    var retryMax = h("input", { type: "number", "class": "group-retry-max", min: -1, value: 16, size: 3 });
    var brokerId = h("input", { type: "number", "class": "group-broker-id", min: 0, value: 0, size: 3 });
    var slow = h("input", { type: "number", "class": "group-slow", min: 0, value: 1, size: 3 });
    var panel = h("div");
    where.appendChild(h("div", { "class": "inline write-form" }, field("Group", name), field("Cluster", cluster),
      field("Consume enabled", enable), field("Broadcast allowed", broadcast), field("Retry queues", retryQ),
      field("Max retries", retryMax), field("Broker id", brokerId), field("Broker when slow", slow),
      writeButton("group-save", "Create / update...", function () {
        var g = name.value.trim();
        if (!g) { showError(panel, new Error("name the group")); return; }
        var body = { groupName: g, cluster: cluster.value, consumeEnable: enable.checked, consumeBroadcastEnable: broadcast.checked,
          retryQueueNums: Number(retryQ.value), retryMaxTimes: Number(retryMax.value), brokerId: Number(brokerId.value),
          whichBrokerWhenConsumeSlowly: Number(slow.value) };
        confirmPanel(panel, "Create or update consumer group " + g + " on every master of cluster " + cluster.value + ".", g,
          "Save group", function (typed) { body.confirm = typed; return post("/api/groups", body); });
      })));
    where.appendChild(panel);
  }

  pages.group = function (root, name) {
    root.appendChild(h("h1", null, "Consumer group ", h("span", { "class": "name", text: name })));
    var cards = root.appendChild(h("div", { "class": "cards" }));
    root.appendChild(h("h2", { text: "Lag over the last minutes" }));
    var chart = root.appendChild(h("div", { id: "lag-chart" }));
    var data = root.appendChild(h("div", { id: "data" }));
    root.appendChild(h("h2", { text: "Reset offset" }));
    var topicSel = h("select", { "class": "reset-topic" });
    var whenSel = h("select", { "class": "reset-when" }, h("option", { value: "-1", text: "to the end (skip everything)" }),
      h("option", { value: "0", text: "to the beginning" }), h("option", { value: "time", text: "to a time..." }));
    var at = h("input", { type: "datetime-local", "class": "reset-time" });
    var panel = h("div");
    root.appendChild(h("div", { "class": "inline" }, "Topic", topicSel, whenSel, at,
      h("button", { "class": "reset-open", text: "Reset...", disabled: !session.writes, title: session.writesWhy, onclick: function () {
        var ts = whenSel.value === "time" ? new Date(at.value).getTime() : Number(whenSel.value);
        if (isNaN(ts)) { showError(panel, new Error("pick a time")); return; }
        confirmPanel(panel, "Move every queue of " + topicSel.value + " for group " + name + " to " +
          (ts === -1 ? "the end" : new Date(ts).toLocaleString()) + ". Messages skipped are not consumed; messages rewound are consumed again.",
          name, "Reset offsets", function (typed) {
            return post("/api/groups/" + enc(name) + "/reset-offset", { topic: topicSel.value, timestamp: ts, confirm: typed });
          });
      } })));
    root.appendChild(panel);
    root.appendChild(h("h2", { text: "Delete" }));
    deleteForm(root, "group", name, "/api/groups/" + enc(name), true);
    if (!session.writes) { root.appendChild(h("p", { "class": "note", text: session.writesWhy })); }
    var topicsKnown = "";
    return function () {
      return api("/api/groups/" + enc(name)).then(function (j) {
        clear(cards);
        cards.appendChild(h("div", { "class": "card" }, h("b", { id: "lag-total", text: j.diffTotal }), "messages behind"));
        cards.appendChild(h("div", { "class": "card" }, h("b", { text: num(j.consumeTps, 1) }), "consumed per second"));
        cards.appendChild(h("div", { "class": "card" }, h("b", { text: j.clients.length }), "clients connected"));
        window.fastmqChart(chart, j.history, { title: "lag of " + name, width: 720, height: 200 });
        clear(data);
        data.appendChild(h("h2", { text: "Lag per queue" }));
        data.appendChild(table("queues", ["Topic", "Broker", "Queue", "Broker offset", "Consumer offset", "Lag", "Last consumed"],
          j.queues.map(function (q) {
            return [q.topic, q.brokerName, q.queueId, q.brokerOffset, q.consumerOffset,
              q.diff > 0 ? h("span", { "class": "lag", text: q.diff }) : q.diff, when(q.lastTimestamp)];
          })));
        data.appendChild(h("h2", { text: "Connected clients" }));
        data.appendChild(table("clients", ["Client id", "Address", "Language", "Version"], j.clients.map(function (c) {
          return [c.clientId, c.clientAddr, c.language, c.version];
        })));
        data.appendChild(h("h2", { text: "Subscriptions" }));
        data.appendChild(table("subscriptions", ["Topic", "Expression"], j.subscriptions.map(function (s) { return [s.topic, s.expression]; })));
        var ts = {};
        j.subscriptions.forEach(function (s) { if (s.topic.indexOf("%RETRY%") !== 0) { ts[s.topic] = 1; } });
        j.queues.forEach(function (q) { if (q.topic.indexOf("%RETRY%") !== 0) { ts[q.topic] = 1; } });
        var names = Object.keys(ts).sort();
        if (names.join("\n") !== topicsKnown) {  // keep the user's choice across refreshes
          topicsKnown = names.join("\n");
          var chosen = topicSel.value;
          clear(topicSel);
          names.forEach(function (t) { topicSel.appendChild(h("option", { value: t, text: t, selected: t === chosen })); });
        }
      });
    };
  };

  function messageBlock(m) {
    var props = Object.keys(m.properties || {}).sort().map(function (k) { return [k, m.properties[k]]; });
    return h("section", { "class": "message" },
      h("h2", null, "Message ", h("code", { "class": "msg-id", text: m.msgId })),
      table("fields", ["Field", "Value"], [["Topic", m.topic], ["Tags", m.tags || ""], ["Keys", (m.keys || []).join(" ")],
        ["Queue", m.queueId], ["Queue offset", m.queueOffset], ["Born", when(m.bornTimestamp) + " from " + m.bornHost],
        ["Stored", when(m.storeTimestamp) + " on " + m.storeHost], ["Reconsume times", m.reconsumeTimes]]),
      h("h2", { text: "Properties" }), table("properties", ["Key", "Value"], props),
      h("h2", { text: "Body" }), h("pre", { "class": "body", text: m.body }),
      h("h2", { text: "Trace" }),
      table("trace", ["Type", "Group", "Client", "Time", "Cost (ms)", "Status"], (m.trace || []).map(function (t) {
        return [t.type, t.group, t.clientHost, when(t.timeStamp), t.costTime, t.success ? "success" : "failed"];
      })));
  }

  var lookup = { id: "", topic: "", key: "" };
  pages.message = function (root) {
    root.appendChild(h("h1", { text: "Message lookup" }));
    var topic = h("input", { name: "topic", placeholder: "topic", value: lookup.topic });
    var id = h("input", { name: "id", placeholder: "message id", size: 40, value: lookup.id });
    var key = h("input", { name: "key", placeholder: "or key", value: lookup.key });
    var data = h("div", { id: "data" });
    function run() {
      lookup = { id: id.value.trim(), topic: topic.value.trim(), key: key.value.trim() };
      if (!lookup.id && !lookup.key) { return; }
      var q = "topic=" + enc(lookup.topic) + (lookup.id ? "&id=" + enc(lookup.id) : "&key=" + enc(lookup.key));
      clear(data).appendChild(h("p", { "class": "note", text: "Looking up..." }));
      api("/api/message?" + q).then(function (j) {
        clear(data);
        if (!j.messages.length) { data.appendChild(h("p", { "class": "note", text: "No message found." })); }
        j.messages.forEach(function (m) { data.appendChild(messageBlock(m)); });
        data.setAttribute("data-done", "1");
      }, function (e) { showError(data, e); data.setAttribute("data-done", "1"); });
    }
    root.appendChild(h("form", { "class": "inline", onsubmit: function (ev) { ev.preventDefault(); run(); } },
      topic, id, key, h("button", { type: "submit", text: "Look up" })));
    root.appendChild(h("p", { "class": "note", text: "An offset message id alone, or a producer's message id or a key with its topic." }));
    root.appendChild(data);
    run();
    byTime(root, function (m) {
      id.value = m.msgId; topic.value = ""; key.value = ""; run();
      root.scrollIntoView();
    });
    return null;  // a lookup is not refreshed on a timer
  };

  function localInput(ms) {  // a datetime-local value, in the browser's zone
    var d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
    return d.toISOString().slice(0, 19);
  }
  var timeQuery = { topic: "", begin: "", end: "" };
  function byTime(root, show) {
    // the dashboard's query by topic and time: every queue between the two times, bounded
    var now = Date.now();
    var topic = h("input", { name: "time-topic", placeholder: "topic", value: timeQuery.topic });
    var begin = h("input", { name: "begin", type: "datetime-local", step: 1, value: timeQuery.begin || localInput(now - 3600000) });
    var end = h("input", { name: "end", type: "datetime-local", step: 1, value: timeQuery.end || localInput(now + 60000) });
    var data = h("div", { id: "time-data" });
    root.appendChild(h("h2", { text: "By topic and time" }));
    root.appendChild(h("form", { "class": "inline time-form", onsubmit: function (ev) {
      ev.preventDefault();
      timeQuery = { topic: topic.value.trim(), begin: begin.value, end: end.value };
      var b = new Date(begin.value).getTime(), e = new Date(end.value).getTime();
      if (!timeQuery.topic || isNaN(b) || isNaN(e)) { showError(data, new Error("a topic and both times")); data.setAttribute("data-done", "1"); return; }
      clear(data).appendChild(h("p", { "class": "note", text: "Querying..." }));
      api("/api/messages?topic=" + enc(timeQuery.topic) + "&begin=" + b + "&end=" + e).then(function (j) {
        clear(data);
        data.appendChild(h("p", { "class": "note time-count", text: j.messages.length + " message(s) stored from " + when(j.begin) +
          " to " + when(j.end) + ", newest first" + (j.more ? "; more were stored: only the first " + j.max +
          " found, queue by queue, are listed (narrow the time range)" : "") + ". At most " + j.max + " are listed." }));
        data.appendChild(table("by-time", ["Message id", "Tags", "Keys", "Queue", "Offset", "Stored", "Body"], j.messages.map(function (m) {
          var body = m.body.length > 120 ? m.body.slice(0, 120) + "..." : m.body;
          return [h("a", { href: "#/message", "class": "msg-link", text: m.msgId, onclick: function (ev) { ev.preventDefault(); show(m); } }),
            m.tags || "", (m.keys || []).join(" "), m.queueId, m.queueOffset, when(m.storeTimestamp), h("span", { "class": "time-body", text: body })];
        })));
        data.setAttribute("data-done", "1");
      }, function (err) { showError(data, err); data.setAttribute("data-done", "1"); });
    } }, topic, "from", begin, "to", end, h("button", { type: "submit", text: "Query" })));
    root.appendChild(data);
  }

  var producerQuery = { topic: "", group: "" };
  pages.producer = function (root) {
    root.appendChild(h("h1", { text: "Producers" }));
    var topic = h("input", { name: "topic", placeholder: "topic", value: producerQuery.topic });
    var group = h("input", { name: "group", placeholder: "producer group", value: producerQuery.group });
    var data = h("div", { id: "data" });
    root.appendChild(h("form", { "class": "inline", onsubmit: function (ev) {
      ev.preventDefault();
      producerQuery = { topic: topic.value.trim(), group: group.value.trim() };
      draw();
    } }, topic, group, h("button", { type: "submit", text: "Show" })));
    root.appendChild(h("p", { "class": "note", text: "The producers of a group connected to a broker of the topic (as mqadmin producerConnection)." }));
    root.appendChild(data);
    function draw() {
      if (!producerQuery.topic || !producerQuery.group) { return Promise.resolve(); }
      return api("/api/producers?topic=" + enc(producerQuery.topic) + "&group=" + enc(producerQuery.group)).then(function (j) {
        clear(data);
        data.appendChild(h("p", { "class": "note", text: j.connections.length + " producer(s) of " + j.group + " online" }));
        data.appendChild(table("producers", ["Client id", "Address", "Language", "Version"], j.connections.map(function (c) {
          return [c.clientId, c.clientAddr, c.language, c.version];
        })));
      });
    }
    return draw;
  };

  var dlqGroup = "";
  pages.dlq = function (root, name) {
    if (name) { dlqGroup = name; }
    root.appendChild(h("h1", { text: "Dead-letter queue" }));
    var input = h("input", { placeholder: "consumer group", value: dlqGroup, list: "dlq-groups" });
    var list = h("datalist", { id: "dlq-groups" });
    root.appendChild(h("form", { "class": "inline", onsubmit: function (ev) {
      ev.preventDefault(); location.hash = "#/dlq/" + enc(input.value.trim());
    } }, "Group", input, list, h("button", { type: "submit", text: "Show" })));
    api("/api/groups").then(function (j) {
      j.groups.forEach(function (g) { list.appendChild(h("option", { value: g.group })); });
    }, function () {});
    var panel = root.appendChild(h("div"));
    var data = root.appendChild(h("div", { id: "data" }));
    if (!dlqGroup) { data.appendChild(h("p", { "class": "note", text: "Pick a group: its dead letters are in %DLQ%<group>." })); return null; }
    return function () {
      return api("/api/dlq/" + enc(dlqGroup)).then(function (j) {
        clear(data);
        data.appendChild(h("p", { "class": "note", text: j.messages.length + " newest dead letters of " + j.group + "; " +
          (j.clients.length ? j.clients.length + " client(s) online to resend to" : "no client online: a resend needs one") }));
        data.appendChild(table("dlq", ["Message id", "Original topic", "Keys", "Stored", "Reconsumed", "Body", ""],
          j.messages.map(function (m) {
            var body = m.body.length > 120 ? m.body.slice(0, 120) + "..." : m.body;
            return [h("code", { text: m.msgId }), (m.properties || {}).RETRY_TOPIC || "", (m.keys || []).join(" "), when(m.storeTimestamp),
              m.reconsumeTimes, h("span", { "class": "dlq-body", text: body }),
              h("button", { "class": "resend-open", text: "Resend...", disabled: !session.writes || !j.clients.length,
                title: session.writesWhy, onclick: function () {
                  var client = h("select", { "class": "resend-client" }, j.clients.map(function (c) { return h("option", { value: c, text: c }); }));
                  confirmPanel(panel, h("span", null, "Hand message ", h("code", { text: m.msgId }), " to client ", client,
                    " of group " + j.group + ", which consumes it at once."), m.msgId, "Resend", function (typed) {
                    return post("/api/dlq/" + enc(j.group) + "/resend", { msgId: m.msgId, clientId: client.value, confirm: typed });
                  });
                } })];
          })));
      });
    };
  };

  var configFilter = "";
  pages.config = function (root, addr) {
    root.appendChild(h("h1", { text: "Broker configuration" }));
    var sel = h("select", { onchange: function () { location.hash = "#/config/" + enc(sel.value); } });
    var filter = h("input", { type: "search", placeholder: "filter keys", value: configFilter,
      oninput: function () { configFilter = filter.value; draw(); } });
    root.appendChild(h("div", { "class": "inline" }, "Broker", sel, filter));
    var data = root.appendChild(h("div", { id: "data" })), last = null;
    function draw() {
      if (!last) { return; }
      var keys = Object.keys(last.config).filter(function (k) { return k.toLowerCase().indexOf(configFilter.toLowerCase()) >= 0; });
      clear(data).appendChild(h("p", { "class": "note", text: last.brokerName + " (" + last.addr + "), broker id " + last.brokerId + ": " + keys.length + " keys" }));
      data.appendChild(table("config", ["Key", "Value"], keys.map(function (k) { return [k, last.config[k]]; })));
    }
    return function () {
      return api("/api/cluster").then(function (c) {
        if (!addr && c.brokers.length) { addr = c.brokers[0].addr; }
        if (sel.options.length !== c.brokers.length) {
          clear(sel);
          c.brokers.forEach(function (b) { sel.appendChild(h("option", { value: b.addr, text: b.brokerName + " " + b.addr, selected: b.addr === addr })); });
        }
        if (!addr) { clear(data).appendChild(h("p", { "class": "note", text: "No broker registered." })); return null; }
        return api("/api/brokers/" + enc(addr) + "/config").then(function (j) { last = j; draw(); });
      });
    };
  };

  // ------------------------------------------------------------------ routing and the timer

  function route() {
    var parts = location.hash.replace(/^#\/?/, "").split("/");
    var page = pages[parts[0]] ? parts[0] : "cluster";
    var arg = parts.length > 1 ? decodeURIComponent(parts.slice(1).join("/")) : "";
    var navPage = { topic: "topics", group: "groups" }[page] || page;
    Array.prototype.forEach.call(document.querySelectorAll("#nav a"), function (a) {
      a.className = a.getAttribute("data-page") === navPage ? "active" : "";
    });
    if (timer) { clearTimeout(timer); timer = null; }
    var mine = ++generation;
    clear(main);
    var root = main.appendChild(h("div", { "class": "page", "data-page": page, "data-route": location.hash }));
    var refresh = pages[page](root, arg);
    if (!refresh) { status(""); return; }
    function tick() {
      var p = refresh();
      (p && p.then ? p : Promise.resolve()).then(function () {
        if (mine !== generation) { return; }
        root.setAttribute("data-loaded", String(Number(root.getAttribute("data-loaded") || 0) + 1));
        status("updated " + new Date().toLocaleTimeString());
      }, function (e) {
        if (mine !== generation) { return; }
        var data = root.querySelector("#data");
        if (data) { showError(data, e); }
        root.setAttribute("data-error", e.message || String(e));
        status("error", true);
      }).then(function () {
        if (mine === generation) { timer = setTimeout(tick, session.refreshMs); }
      });
    }
    tick();
  }

  api("/api/session").then(function (s) {
    session = s;
    window.addEventListener("hashchange", route);
    route();
  }, function (e) { showError(main, e); status("error", true); });
})();
