// SPDX-License-Identifier: BSD-3-Clause
// page.js — draws the graph page (embedded into every page by html.c): the laid-out graph from
// the JSON in #graph-data as SVG, pan and zoom, selection with a panel of all a node holds,
// search, the legend and the regions table; the bodies of conditional nodes are framed
// clusters below their node, joined to it by a dashed line. When done it sets data-recap-rendered on <html> to the number of
// nodes drawn; tests read it.
(function () {
  'use strict';
  var root = document.documentElement;
  var data = JSON.parse(document.getElementById('graph-data').textContent);
  var svg = document.getElementById('graph');
  var NS = svg.namespaceURI;
  var view = document.getElementById('viewport');
  var canvas = document.getElementById('canvas');
  var search = document.getElementById('search');
  var matches = document.getElementById('matches');
  var fields = document.getElementById('fields');
  var hint = document.getElementById('hint');

  function make(tag, attrs, parent) {
    var e = document.createElementNS(NS, tag);
    for (var k in attrs) if (Object.prototype.hasOwnProperty.call(attrs, k)) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  // ---- drawing ------------------------------------------------------------------------------
  var layerClusters = make('g', {'class': 'clusters'}, view);
  var layerEdges = make('g', {'class': 'edges'}, view);
  var layerNodes = make('g', {'class': 'nodes'}, view);
  var tints = ['#eef3fb', '#e3ecf8', '#d8e4f4', '#ccdcf0'];

  // Clusters: annotation scopes, and the bodies of conditional nodes (framed, dashed, with the
  // region's label: "while body", "if", "else", "case 2"), nested as the graph nests them.
  var bodyTints = ['#f4f1fa', '#ebe5f5', '#e1d9ef', '#d7cdea'];
  data.clusters.forEach(function (c) {
    var body = c.node !== null;
    var g = make('g', {'class': body ? 'cluster body' : 'cluster'}, layerClusters);
    if (body) g.setAttribute('data-node', c.node);
    make('rect', {x: c.x, y: c.y, width: c.w, height: c.h, rx: 8,
                  fill: (body ? bodyTints : tints)[(c.depth - 1) % tints.length]}, g);
    var t = make('text', {x: c.x + 10, y: c.y + 16}, g);
    t.textContent = c.label;
    var title = make('title', {}, g);
    title.textContent = (body ? c.label + ' of #' + c.node + ', ' : '') + c.path + ' (' + c.nodes +
        ' node' + (c.nodes === 1 ? '' : 's') + ')';
  });

  function edgePath(points) {
    var d = 'M' + points[0][0] + ',' + points[0][1];
    for (var i = 1; i < points.length; i++) {
      var a = points[i - 1], b = points[i];
      if (a[0] === b[0]) { d += ' L' + b[0] + ',' + b[1]; continue; }
      var my = (a[1] + b[1]) / 2;
      d += ' C' + a[0] + ',' + my + ' ' + b[0] + ',' + my + ' ' + b[0] + ',' + b[1];
    }
    return d;
  }
  var edgeElems = data.edges.map(function (e) {
    return make('path', {'class': 'edge', d: edgePath(e.points), 'marker-end': 'url(#arrow)',
                         'data-from': e.from, 'data-to': e.to}, layerEdges);
  });

  // A dashed line from each conditional node down to each of its bodies.
  data.clusters.forEach(function (c) {
    if (c.node === null) return;
    var n = data.nodes[c.node];
    make('path', {'class': 'region-link', d: 'M' + (n.x + n.w / 2) + ',' + (n.y + n.h) + ' L' +
                  (c.x + c.w / 2) + ',' + c.y, 'data-from': c.node}, layerEdges);
  });

  // "while body of #3", or null for the graph's own nodes.
  function bodyLabel(p, branch) {
    var kind = data.nodes[p].region;
    if (kind === 'while' && branch === 0) return 'while body';
    if ((kind === 'if' || kind === 'if_else') && branch === 0) return 'if';
    if (kind === 'if_else' && branch === 1) return 'else';
    if (kind === 'switch') return 'case ' + branch;
    return 'branch ' + branch;
  }
  function placeOf(n) {
    return n.parent === null ? null : bodyLabel(n.parent, n.branch) + ' of #' + n.parent;
  }

  var nodeElems = data.nodes.map(function (n) {
    var g = make('g', {'class': 'node', id: 'node-' + n.i, 'data-index': n.i}, layerNodes);
    if (n.type === 'conditional') g.setAttribute('data-region', n.region || 'unknown');
    make('rect', {x: n.x, y: n.y, width: n.w, height: n.h, rx: 6, fill: n.fill}, g);
    var name = make('text', {x: n.x + n.w / 2, y: n.y + 17}, g);
    name.textContent = n.name;
    var detail = make('text', {'class': 'detail', x: n.x + n.w / 2, y: n.y + 32}, g);
    detail.textContent = '#' + n.i + (n.detail ? ' \u00b7 ' + n.detail : '');
    var title = make('title', {}, g);
    title.textContent = '#' + n.i + ' ' + n.type + (n.pretty ? '\n' + n.pretty : '') +
        (n.scope ? '\n[' + n.scope + ']' : '') + (placeOf(n) ? '\nin the ' + placeOf(n) : '');
    g.addEventListener('click', function (ev) { ev.stopPropagation(); select(n.i); });
    return g;
  });

  // ---- pan and zoom -------------------------------------------------------------------------
  var t = {k: 1, x: 0, y: 0};
  function apply() {
    view.setAttribute('transform', 'translate(' + t.x + ',' + t.y + ') scale(' + t.k + ')');
  }
  // The whole graph in the view; or, with byWidth, as wide as the view (at most life size) from
  // the top, which keeps the text of a tall graph readable.
  var fitted = null; // how the view was last fitted ('whole' or 'width'); null once moved by hand
  function fit(byWidth) {
    fitted = byWidth === true ? 'width' : 'whole';
    var w = canvas.clientWidth || 800, h = canvas.clientHeight || 600;
    var k = Math.min(w / data.width, h / data.height);
    if (byWidth === true) k = Math.min(w / data.width, 1.25);
    t.k = Math.min(Math.max(k, 0.02), 2);
    t.x = (w - data.width * t.k) / 2;
    t.y = Math.max((h - data.height * t.k) / 2, 0);
    apply();
  }
  function zoomAt(factor, cx, cy) {
    fitted = null;
    var k = Math.min(Math.max(t.k * factor, 0.02), 8);
    t.x = cx - (cx - t.x) * (k / t.k);
    t.y = cy - (cy - t.y) * (k / t.k);
    t.k = k;
    apply();
  }
  function centreOn(n) {
    var w = canvas.clientWidth, h = canvas.clientHeight;
    fitted = null;
    if (t.k < 0.8) t.k = 0.8;
    t.x = w / 2 - (n.x + n.w / 2) * t.k;
    t.y = h / 2 - (n.y + n.h / 2) * t.k;
    apply();
  }
  svg.addEventListener('wheel', function (ev) {
    ev.preventDefault();
    var r = svg.getBoundingClientRect();
    zoomAt(Math.exp(-ev.deltaY * 0.0015), ev.clientX - r.left, ev.clientY - r.top);
  }, {passive: false});
  var drag = null, dragged = false;
  svg.addEventListener('pointerdown', function (ev) {
    drag = {x: ev.clientX, y: ev.clientY, tx: t.x, ty: t.y, moved: false};
    canvas.classList.add('dragging');
  });
  window.addEventListener('pointermove', function (ev) {
    if (!drag) return;
    var dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
    if (drag.moved) fitted = null;
    t.x = drag.tx + dx;
    t.y = drag.ty + dy;
    apply();
  });
  window.addEventListener('pointerup', function () {
    dragged = drag !== null && drag.moved;
    drag = null;
    canvas.classList.remove('dragging');
  });
  // A click on the background (not the end of a drag) clears the selection.
  svg.addEventListener('click', function () { if (!dragged) select(null); });
  // A new window size keeps the last fit (a view moved by hand stays as it is).
  window.addEventListener('resize', function () { if (fitted) fit(fitted === 'width'); });
  document.getElementById('fit').addEventListener('click', function () { fit(); });
  document.getElementById('zoom-in').addEventListener('click', function () {
    zoomAt(1.25, canvas.clientWidth / 2, canvas.clientHeight / 2);
  });
  document.getElementById('zoom-out').addEventListener('click', function () {
    zoomAt(0.8, canvas.clientWidth / 2, canvas.clientHeight / 2);
  });
  document.addEventListener('keydown', function (ev) {
    if (ev.target === search) {
      if (ev.key === 'Escape') { search.value = ''; runSearch(); search.blur(); }
      return;
    }
    if (ev.key === 'f' || ev.key === '0') fit();
    else if (ev.key === 'w') fit(true);
    else if (ev.key === '+' || ev.key === '=') zoomAt(1.25, canvas.clientWidth / 2, canvas.clientHeight / 2);
    else if (ev.key === '-') zoomAt(0.8, canvas.clientWidth / 2, canvas.clientHeight / 2);
    else if (ev.key === '/') { ev.preventDefault(); search.focus(); }
    else if (ev.key === 'Escape') select(null);
  });

  // ---- selection and the panel of fields ----------------------------------------------------
  var selected = null;
  function bytes(v) {
    var units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], u = 0, x = v;
    while (x >= 1024 && u < 4) { x /= 1024; u++; }
    return u ? x.toFixed(1) + ' ' + units[u] + ' (' + v + ' B)' : v + ' B';
  }
  function field(name, value, code) {
    var dt = document.createElement('dt');
    dt.textContent = name;
    var dd = document.createElement('dd');
    if (code) dd.className = 'code';
    if (value instanceof Node) dd.appendChild(value); else dd.textContent = value;
    fields.appendChild(dt);
    fields.appendChild(dd);
  }
  function nodeLinks(list) {
    var span = document.createElement('span');
    if (!list.length) { span.textContent = 'none'; return span; }
    list.forEach(function (i, k) {
      if (k) span.appendChild(document.createTextNode(', '));
      var a = document.createElement('a');
      a.textContent = '#' + i + ' ' + data.nodes[i].name;
      a.addEventListener('click', function () { select(i); centreOn(data.nodes[i]); });
      span.appendChild(a);
    });
    return span;
  }
  function list(items) {
    var ul = document.createElement('ul');
    items.forEach(function (s) {
      var li = document.createElement('li');
      li.textContent = s;
      ul.appendChild(li);
    });
    return ul;
  }
  function select(i) {
    if (selected !== null) nodeElems[selected].classList.remove('selected');
    edgeElems.forEach(function (e, k) {
      var d = data.edges[k];
      e.classList.toggle('hot', i !== null && (d.from === i || d.to === i));
    });
    selected = i;
    fields.textContent = '';
    hint.hidden = i !== null;
    if (i === null) return;
    nodeElems[i].classList.add('selected');
    var n = data.nodes[i];
    field('node', '#' + n.i + ' (layer ' + n.layer + ')');
    field('type', n.type);
    if (n.pretty) field('name', n.pretty, true);
    if (n.kernel && n.kernel !== n.pretty) field('mangled name', n.kernel, true);
    if (n.grid) {
      field('grid', n.grid.join(' \u00d7 '));
      field('block', n.block.join(' \u00d7 '));
      field('dynamic shared memory', bytes(n.smem));
    }
    if (n.bytes) field('bytes', bytes(n.bytes));
    if (n.type === 'conditional') {
      var bodies = [];
      for (var b = 0; b < n.branches; b++) bodies.push(bodyLabel(n.i, b));
      field('region', (n.region || 'unknown kind') + ', ' + n.branches + ' branch' + (n.branches === 1 ? '' : 'es') +
          (bodies.length ? ': ' + bodies.join(', ') : ''));
    }
    if (n.parent !== null) {
      var chain = [], m = n;
      while (m.parent !== null) { chain.push(placeOf(m)); m = data.nodes[m.parent]; }
      field('inside', chain.join(', in the '));
    }
    if (n.scope) field('annotation', n.scope);
    if (n.tools_id !== null) field('tools id', n.tools_id);
    if (n.params && n.params.length) field('parameters', list(n.params), true);
    if (n.graph_params && n.graph_params.length) field('graph parameters', list(n.graph_params), true);
    if (n.set_alone) field('set on this node alone', n.set_alone);
    if (n.allocs && n.allocs.length) {
      field('allocations read (input liveness)', list(n.allocs.map(function (a) {
        return a.base + ', ' + bytes(a.size) + ', generation ' + a.generation + ', read by ' +
            a.readers + ' node' + (a.readers === 1 ? '' : 's') +
            (a.site ? ', allocated at ' + a.site : '') + (a.freed ? ', freed before capture end' : '');
      })), true);
    }
    if (data.pool) field('graph pool', data.pool);
    field('waits for', nodeLinks(n.deps));
    field('waited on by', nodeLinks(n.succ));
  }

  // ---- search and legend --------------------------------------------------------------------
  var haystacks = data.nodes.map(function (n) {
    return ['#' + n.i, n.type, n.name, n.pretty || '', n.kernel || '', n.scope || '',
            n.region || '', placeOf(n) || ''].join('\n').toLowerCase();
  });
  var hits = [], hitAt = -1;
  function runSearch() {
    var q = search.value.trim().toLowerCase();
    hits = [];
    hitAt = -1;
    nodeElems.forEach(function (g, i) {
      var hit = q !== '' && haystacks[i].indexOf(q) >= 0;
      g.classList.toggle('match', hit);
      if (hit) hits.push(i);
    });
    svg.classList.toggle('searching', q !== '');
    matches.textContent = q ? hits.length + ' match' + (hits.length === 1 ? '' : 'es') : '';
  }
  search.addEventListener('input', runSearch);
  search.addEventListener('keydown', function (ev) {
    if (ev.key !== 'Enter' || !hits.length) return;
    hitAt = (hitAt + 1) % hits.length;
    select(hits[hitAt]);
    centreOn(data.nodes[hits[hitAt]]);
  });
  Array.prototype.forEach.call(document.querySelectorAll('#counts tr'), function (row) {
    row.addEventListener('click', function () {
      var type = row.getAttribute('data-type');
      search.value = search.value === type ? '' : type;
      runSearch();
    });
  });

  // The regions table: a row, or a link to the enclosing region, selects its node.
  Array.prototype.forEach.call(document.querySelectorAll('#regions [data-node]'), function (e) {
    e.addEventListener('click', function (ev) {
      ev.preventDefault();
      ev.stopPropagation();
      var i = +e.getAttribute('data-node');
      select(i);
      centreOn(data.nodes[i]);
    });
  });

  // A graph too tall to read whole starts as wide as the view, from the top.
  var whole = Math.min((canvas.clientWidth || 800) / data.width,
                       (canvas.clientHeight || 600) / data.height);
  if (whole < 0.7) fit(true); else fit();
  // A link to page.html#node-12 opens with node 12 selected.
  var linked = /^#node-(\d+)$/.exec(window.location.hash);
  if (linked && +linked[1] < data.nodes.length) select(+linked[1]);
  root.setAttribute('data-recap-rendered', String(layerNodes.childNodes.length));
})();
