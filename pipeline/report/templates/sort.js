// A click on a column header of a sortable table (or Enter on it) sorts the rows by that column,
// a second one the other way. Numbers sort by their data-sort value; rows with no value stay last.
for (const th of document.querySelectorAll("table.sortable thead th")) {
  th.tabIndex = 0;
  const sort = () => {
    const table = th.closest("table"), col = th.cellIndex, body = table.tBodies[0];
    const up = th.getAttribute("aria-sort") !== "ascending";
    for (const other of th.parentElement.cells) other.removeAttribute("aria-sort");
    th.setAttribute("aria-sort", up ? "ascending" : "descending");
    const key = (row) => {
      const cell = row.cells[col], raw = cell ? cell.dataset.sort : "";
      if (raw !== undefined) return raw === "" ? [2, 0] : [0, Number(raw)];
      const text = cell.textContent.trim();
      return text === "" ? [2, 0] : [1, text];
    };
    const order = (a, b) => (a[0] === 1 ? a[1].localeCompare(b[1], undefined, {numeric: true}) : a[1] - b[1]);
    const rows = Array.from(body.rows, (row) => [key(row), row]);
    rows.sort(([a], [b]) => a[0] - b[0] || (a[0] === 2 ? 0 : order(a, b) * (up ? 1 : -1)));
    body.append(...rows.map(([, row]) => row));
  };
  th.addEventListener("click", sort);
  th.addEventListener("keydown", (event) => { if (event.key === "Enter") sort(); });
}
