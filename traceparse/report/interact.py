"""The HTML report's one inline script: sortable tables and a filter box per table.

Written here, inlined in the page, and allowed by the content security policy
through its SHA-256 hash only (``SCRIPT_HASH``): the page still fetches
nothing, works offline, and a script that reached the markup any other way
(a hostile op name) cannot run. No inline event handlers: listeners are added
from the script.

Sorting reads the cells as people see them ("4 MiB", "52.7 µs", "12.5%",
"1,024"), so numbers sort by value in their unit; "-" (unknown) sorts last. A
table's total row stays last.
"""

from __future__ import annotations

import base64
import hashlib

__all__ = ["SCRIPT", "SCRIPT_HASH"]

SCRIPT = r"""
(() => {
  const UNITS = {B: 1, KiB: 1024, MiB: 1048576, GiB: 1073741824, TiB: 1099511627776,
    ps: 1e-12, ns: 1e-9, "µs": 1e-6, ms: 1e-3, s: 1, min: 60, h: 3600, "%": 1, "": 1};
  const value = (text) => {
    const t = text.trim().replace(/\u2212/g, "-");
    const m = /^([+-]?[\d,]*\.?\d+)\s*(\S*)$/.exec(t);
    if (!m || !(m[2] in UNITS)) return null;
    return parseFloat(m[1].replace(/,/g, "")) * UNITS[m[2]];
  };
  const compare = (a, b) => {
    const x = value(a), y = value(b);
    const ax = a.trim() === "-", by = b.trim() === "-";
    if (ax || by) return ax === by ? 0 : ax ? 1 : -1;
    if (x !== null && y !== null) return x - y;
    return a.localeCompare(b);
  };
  document.querySelectorAll("table").forEach((table) => {
    const body = table.tBodies[0];
    if (!body) return;
    const rows = () => [...body.rows].filter((r) => !r.classList.contains("total"));
    [...table.tHead.rows[0].cells].forEach((th, column) => {
      th.tabIndex = 0;
      th.title = "Sort by this column";
      const sort = () => {
        const down = th.getAttribute("aria-sort") !== "ascending";
        table.querySelectorAll("th[aria-sort]").forEach((h) => h.removeAttribute("aria-sort"));
        th.setAttribute("aria-sort", down ? "ascending" : "descending");
        const sorted = rows().sort((a, b) => {
          const order = compare(a.cells[column].innerText, b.cells[column].innerText);
          return down ? order : -order;
        });
        const total = body.querySelector("tr.total");
        sorted.forEach((r) => body.insertBefore(r, total));
      };
      th.addEventListener("click", sort);
      th.addEventListener("keydown", (e) => { if (e.key === "Enter") sort(); });
    });
    const box = document.createElement("input");
    box.type = "search";
    box.className = "filter";
    box.placeholder = "Filter rows";
    box.setAttribute("aria-label", "Filter the rows of the table below");
    box.addEventListener("input", () => {
      const q = box.value.toLowerCase();
      rows().forEach((r) => { r.hidden = q !== "" && !r.innerText.toLowerCase().includes(q); });
    });
    const holder = table.closest(".scroll") || table;
    holder.parentNode.insertBefore(box, holder);
  });
})();
"""

SCRIPT_HASH = "sha256-" + base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
