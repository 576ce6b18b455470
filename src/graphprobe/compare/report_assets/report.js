(function () {
  var svg = document.getElementById("plot");
  var hover = document.getElementById("hover");
  svg.querySelectorAll("circle.pt").forEach(function (c) {
    c.addEventListener("mouseenter", function () { hover.textContent = c.querySelector("title").textContent; });
  });
  var tbody = document.querySelector("#rows tbody");
  var heads = document.querySelectorAll("#rows th");
  var boxes = document.querySelectorAll("input.verdict");
  var search = document.getElementById("row-search");
  var count = document.getElementById("row-count");
  function filter() {
    var q = search.value.toLowerCase(), on = {}, shown = 0;
    boxes.forEach(function (b) { on[b.value] = b.checked; });
    Array.prototype.forEach.call(tbody.rows, function (tr) {
      var visible = on[tr.dataset.result] && tr.cells[0].textContent.toLowerCase().indexOf(q) >= 0;
      tr.hidden = !visible;
      if (visible) shown++;
    });
    count.textContent = shown + " of " + tbody.rows.length + " rows shown";
  }
  function key(tr, col) {
    var cell = tr.cells[col];
    return cell.dataset.v !== undefined ? Number(cell.dataset.v) : cell.textContent.toLowerCase();
  }
  function sortBy(col, dir) {
    var sign = dir === "asc" ? 1 : -1;
    var rows = Array.prototype.slice.call(tbody.rows);
    rows.sort(function (a, b) {
      var x = key(a, col), y = key(b, col);
      return x < y ? -sign : x > y ? sign : 0;
    });
    rows.forEach(function (tr) { tbody.appendChild(tr); });
    heads.forEach(function (th) { th.removeAttribute("data-dir"); });
    heads[col].setAttribute("data-dir", dir);
  }
  heads.forEach(function (th, col) {
    th.addEventListener("click", function () {
      sortBy(col, th.getAttribute("data-dir") === "desc" ? "asc" : "desc");
    });
  });
  boxes.forEach(function (b) { b.addEventListener("change", filter); });
  search.addEventListener("input", filter);
  // State from the address: #verdict=error,warning&q=name&sort=COLUMN-INDEX&dir=asc|desc
  var params = new URLSearchParams(location.hash.slice(1));
  if (params.has("verdict")) {
    var wanted = params.get("verdict").split(",");
    boxes.forEach(function (b) { b.checked = wanted.indexOf(b.value) >= 0; });
  }
  if (params.has("q")) search.value = params.get("q");
  if (params.has("sort") && heads[Number(params.get("sort"))]) {
    sortBy(Number(params.get("sort")), params.get("dir") === "asc" ? "asc" : "desc");
  }
  filter();
  // Read back by tests: the page was laid out and scripted, and no two axis
  // labels overlap.
  var labels = Array.prototype.map.call(svg.querySelectorAll("text.axis"), function (t) { return t.getBBox(); });
  var overlaps = 0;
  for (var i = 0; i < labels.length; i++)
    for (var j = i + 1; j < labels.length; j++)
      if (labels[i].y < labels[j].y + labels[j].height && labels[j].y < labels[i].y + labels[i].height) overlaps++;
  document.body.setAttribute("data-axis-overlaps", String(overlaps));
  document.body.setAttribute("data-plot-width", String(Math.round(svg.getBoundingClientRect().width)));
  document.body.setAttribute("data-points", String(svg.querySelectorAll("circle.pt").length));
})();
