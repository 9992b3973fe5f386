// A sortable table: click a header to sort by it, again to reverse. Rows are re-rendered from
// data on every update (a few hundred rows at most), keeping the chosen order.
//
// Sorted by the server instead (the sweep page's runs table, one page of a 10,000-run sweep):
// pass onSort(sort) and give the columns the server can sort a `sortField`; a click then only
// records the order and calls onSort, which fetches the page in that order and setRows() it as
// given. Columns without a sortField get no sort button.
//
//   const table = new SortableTable(container, {columns, rowKey: (row) => row.id,
//                                               sort: {key: 'name', descending: false}});
//   table.setRows(rows);
// A column: {key, label, title (tooltip), value(row) → number|string|null for sorting,
//            render(row) → text or Node (default: value), numeric (right-aligned)}.
import {h} from './format.js';

function isMissing(value) {
  return value === null || value === undefined || (typeof value === 'number' && Number.isNaN(value));
}

function compare(a, b) {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  return String(a).localeCompare(String(b), undefined, {numeric: true});
}

export class SortableTable {
  constructor(container, {columns, rowKey, sort = null, emptyText = 'No rows.', testId = null,
                          filter = null, onSort = null}) {
    this.columns = columns;
    this.rowKey = rowKey;
    this.sort = sort;
    this.emptyText = emptyText;
    this.filter = filter;  // optional (row) → bool
    this.onSort = onSort;  // set: the rows come sorted by the server
    this.rows = [];
    this.table = h('table', {class: 'data-table', 'data-testid': testId});
    this.head = h('thead');
    this.body = h('tbody');
    this.table.append(this.head, this.body);
    container.append(h('div', {class: 'table-scroll'}, this.table));
    this.renderHead();
  }

  // Replaces the columns (e.g. one per evaluation set once results name several); the rows are
  // drawn again at the next setRows.
  setColumns(columns) {
    this.columns = columns;
    this.renderHead();
  }

  setRows(rows) {
    this.rows = rows;
    this.renderBody();
  }

  setFilter(filter) {
    this.filter = filter;
    this.renderBody();
  }

  sortBy(key) {
    const descending = this.sort && this.sort.key === key ? !this.sort.descending : false;
    this.sort = {key, descending};
    this.renderHead();
    if (this.onSort) this.onSort(this.sort);
    else this.renderBody();
  }

  renderHead() {
    const row = h('tr');
    for (const column of this.columns) {
      const sorted = this.sort && this.sort.key === column.key;
      const ariaSort = sorted ? (this.sort.descending ? 'descending' : 'ascending') : 'none';
      const arrow = sorted ? (this.sort.descending ? '▼' : '▲') : '';
      const sortable = !this.onSort || column.sortField;
      row.append(h('th', {class: column.numeric ? 'numeric' : null, 'aria-sort': sortable ? ariaSort : null,
                          title: column.title || null, 'data-key': column.key},
                   sortable ? h('button', {type: 'button', class: 'sort-button',
                                           onclick: () => this.sortBy(column.key)},
                                column.label, h('span', {class: 'sort-arrow'}, arrow))
                            : h('span', {class: 'sort-label'}, column.label)));
    }
    this.head.replaceChildren(row);
  }

  renderBody() {
    let rows = this.filter ? this.rows.filter(this.filter) : [...this.rows];
    if (this.sort && !this.onSort) {
      const column = this.columns.find((c) => c.key === this.sort.key);
      if (column) {
        const sign = this.sort.descending ? -1 : 1;
        rows = rows.map((row, index) => ({row, index, value: column.value(row)}))
                   .sort((a, b) => {
                     // Rows without a value (no BPC yet) stay last in either direction.
                     const aMissing = isMissing(a.value), bMissing = isMissing(b.value);
                     if (aMissing || bMissing) {
                       return aMissing === bMissing ? a.index - b.index : aMissing ? 1 : -1;
                     }
                     return sign * compare(a.value, b.value) || a.index - b.index;
                   })
                   .map((entry) => entry.row);
      }
    }
    const body = rows.map((row) => h('tr', {'data-row-key': this.rowKey(row)},
                                      this.columns.map((column) => {
      const content = column.render ? column.render(row) : column.value(row);
      return h('td', {class: column.numeric ? 'numeric' : null, 'data-key': column.key},
               content ?? '—');
    })));
    if (body.length === 0) {
      body.push(h('tr', {class: 'empty'},
                  h('td', {colspan: String(this.columns.length)}, this.emptyText)));
    }
    this.body.replaceChildren(...body);
  }
}
