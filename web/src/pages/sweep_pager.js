// The sweep page's runs table controls: state filter, rows per page, previous/next, and the
// order the server sorts by. The server pages with opaque tokens (next_page_token), so the
// pager keeps the token of every page it has walked through: "previous" goes back to a token it
// has, and a poll re-reads the current page with its own token. Changing the filter, the order
// or the page size starts again at the first page.
import {h, num} from '../format.js';

const whole = (n) => n.toLocaleString('en-US');  // 10000 → "10,000"

const STATES = ['PENDING', 'LEASED', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED'];
const PAGE_SIZES = [25, 50, 100, 200];
export const DEFAULT_PAGE_SIZE = 100;

export class RunsPager {
  // `container`: the runs card; `onChange()`: re-read the page after the user changed something.
  constructor(container, {onChange}) {
    this.onChange = onChange;
    this.state = 'all';
    this.orderBy = '';  // a ResultRow field, optionally " desc"; '' = grid order
    this.pageSize = DEFAULT_PAGE_SIZE;
    this.tokens = [''];  // tokens[i]: the token of page i ('' = the first)
    this.index = 0;
    this.next = null;  // the next page's token; null on the last page

    this.filter = h('select', {'aria-label': 'Filter runs by state', 'data-testid': 'state-filter'},
                    ['all', ...STATES].map((s) => h('option', {value: s}, s === 'all' ? 'All states' : s)));
    this.filter.addEventListener('change', () => {
      this.state = this.filter.value;
      this.restart();
    });
    this.size = h('select', {'aria-label': 'Rows per page', 'data-testid': 'page-size'},
                  PAGE_SIZES.map((n) => h('option', {value: String(n), selected: n === this.pageSize},
                                          `${n} rows`)));
    this.size.addEventListener('change', () => {
      this.pageSize = Number(this.size.value);
      this.restart();
    });
    this.previous = h('button', {type: 'button', class: 'pager-button', 'data-testid': 'page-previous',
                                 onclick: () => this.move(-1)}, '← Previous');
    this.following = h('button', {type: 'button', class: 'pager-button', 'data-testid': 'page-next',
                                  onclick: () => this.move(1)}, 'Next →');
    this.info = h('span', {class: 'muted', 'data-testid': 'page-info', 'aria-live': 'polite'});
    this.error = h('span', {class: 'pager-error', role: 'status', hidden: true});
    container.append(h('div', {class: 'card-head'}, h('h2', {}, 'Runs'), this.info,
                       h('div', {class: 'pager'}, this.filter, this.size, this.previous, this.following)),
                     this.error);
    this.setButtons();
  }

  // What getTablePage should fetch now.
  request() {
    return {states: this.state === 'all' ? [] : [this.state], orderBy: this.orderBy,
            pageSize: this.pageSize, pageToken: this.tokens[this.index]};
  }

  sortBy(field, descending) {
    this.orderBy = field ? `${field}${descending ? ' desc' : ''}` : '';
    this.restart();
  }

  onLaterPage() {
    return this.index > 0;
  }

  firstPage() {
    this.tokens = [''];
    this.index = 0;
  }

  restart() {
    this.firstPage();
    this.onChange();
  }

  move(step) {
    if (step > 0 && !this.next) return;
    if (step < 0 && this.index === 0) return;
    this.index += step;
    if (step > 0) this.tokens[this.index] = this.next;
    this.tokens.length = this.index + 1;  // a later page's token is read again when walked to
    this.onChange();
  }

  // After a page arrived: its row count, the next page's token and the sweep's counts (how many
  // runs the filter matches, for "rows 101–200 of 10,000").
  setPage(rows, nextToken, counts) {
    this.next = nextToken || null;
    this.error.hidden = true;
    const matching = this.state === 'all' ? num(counts?.total) : num(counts?.[this.state.toLowerCase()]);
    const first = this.index * this.pageSize + 1;
    const pages = Math.max(1, Math.ceil(matching / this.pageSize));
    this.info.textContent = rows === 0 ? 'no runs match'
        : `rows ${whole(first)}–${whole(first + rows - 1)} of ${whole(matching)} · page ${this.index + 1} of ${whole(pages)}`;
    this.info.dataset.matching = String(matching);
    this.info.dataset.page = String(this.index + 1);
    this.setButtons();
  }

  showError(error) {
    this.error.hidden = false;
    this.error.textContent = `Could not load the runs: ${error.message}`;
  }

  setButtons() {
    this.previous.disabled = this.index === 0;
    this.following.disabled = !this.next;
  }
}
