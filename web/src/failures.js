// Why a run failed, in the words the CLI uses: the class in lowercase YAML spelling
// ("user_error") and what to do about it. The remedies are core/failure_remedy.cc's table, word
// for word (web_test checks that every C++ remedy is in the bundled app.js).
import {h} from './format.js';

// One line each, so that the bundle holds every sentence whole (web_test looks for them).
/* eslint-disable max-len */
const REMEDIES = {
  PREEMPTED: "nothing to do: the run resumes on the next free worker; if workers keep being stopped, see why in their logs",
  INFRASTRUCTURE: "see the worker's log for the crash; the run is retried up to max_attempts",
  OUT_OF_MEMORY: "give it a worker with more memory, or lower training.batch_tokens or the model's size (parity plan shows the memory estimate)",
  USER_ERROR: "fix the spec or give the workers the dataset; see the message",
  LEASE_EXPIRED: "check that the worker is alive and reaches the scheduler (network, load); see the worker's log",
  DIVERGED: "lower training.learning_rate or lengthen the warmup; the same spec diverges again",
  HUNG: "check the worker's device and file system (a stuck read or GPU); see the worker's log",
  INVALID_RESULT: "the engine's summary does not match the plan: report it with the run's id and the worker's log",
  DATA_MISMATCH: "re-copy the dataset or pin data.dataset_digest",
};
/* eslint-enable max-len */
const GENERIC_REMEDY = "see the message and the worker's log";

function classKey(failureClass) {
  return String(failureClass || '').replace('FAILURE_CLASS_', '');
}

// "user_error"; '' when the run has no failure class.
export function failureClassName(failureClass) {
  const key = classKey(failureClass);
  return key && key !== 'UNSPECIFIED' ? key.toLowerCase() : '';
}

export function failureRemedy(failureClass) {
  const key = classKey(failureClass);
  if (!key || key === 'UNSPECIFIED') return '';
  return REMEDIES[key] || GENERIC_REMEDY;
}

// "user_error: dataset 'x' not found on worker w"; '' when the run has no failure.
export function failureText(run) {
  const name = failureClassName(run?.failure_class);
  const message = run?.failure?.message || '';
  if (!name) return message;
  return message ? `${name}: ${message}` : name;
}

// The distinct failures of a sweep's FAILED runs, most runs first: [{className, message, remedy,
// runs}], from its summary (/sweeps/ID/summary: the server folded every FAILED run into its
// distinct failures, so a 10,000-run sweep's banner needs no run list).
export function summaryFailures(summary) {
  return (summary?.failures || []).map((f) => ({
    className: failureClassName(f.failure_class), message: f.message || '(no reason recorded)',
    remedy: failureRemedy(f.failure_class), runs: Number(f.runs)}));
}

// One failure, as the run page and the sweep page's banner show it.
export function failureBlock({className, message, remedy, runs}) {
  return h('div', {class: 'failure', role: 'alert', 'data-testid': 'failure'},
           h('p', {},
             runs ? h('span', {'data-testid': 'failure-runs'}, `${runs} run${runs === 1 ? '' : 's'} failed · `) : null,
             className ? h('strong', {'data-testid': 'failure-class'}, className) : null,
             className ? ': ' : null, h('span', {'data-testid': 'failure-message'}, message)),
           remedy ? h('p', {class: 'remedy'}, h('strong', {}, 'What to do: '),
                      h('span', {'data-testid': 'failure-remedy'}, remedy)) : null);
}
