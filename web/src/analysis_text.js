// How the dashboard words the analysis's figures — the same wording as `parity report`
// (cli/report_format.h), so a figure reads the same in the panel, analysis.md and the terminal:
// which EL a figure is, its interval and extrapolation mark, a group's region and lack-of-fit
// verdict, a point optimum or the reason there is none.
import {fixed, num, percent} from './format.js';

// A GridPointLeverage: "2.31 [1.80 – 2.95] (extrapolated ×1.9)" or "— (reason)".
export function leverageText(leverage) {
  if (!leverage || !(num(leverage.value) > 0)) {
    return `— (${leverage?.missing_reason || 'not measured'})`;
  }
  const range = leverage.interval;
  let text = fixed(leverage.value, 2);
  if (range) text += ` [${fixed(range.low, 2)} – ${fixed(range.high, 2)}]`;
  if (leverage.extrapolated) text += ` (extrapolated ×${fixed(leverage.extrapolation_factor, 1)})`;
  return text;
}

export const REGION_TEXT = {
  REGION_STATUS_BEST: 'best',
  REGION_STATUS_INSIDE: 'inside',
  REGION_STATUS_OUTSIDE: 'outside',
  REGION_STATUS_UNTESTED: 'untested',
};

// "15.0% – 40.0%" (with " (not contiguous)"), or "— (note)".
export function regionText(optimum) {
  const region = optimum.region;
  if (!region) return `— (${optimum.region_note})`;
  return `${percent(region.low)} – ${percent(region.high)}${region.contiguous ? '' : ' (not contiguous)'}`;
}

// A p-value to three significant figures: 0.217, 0.000301 (as cli/report_format.h's PValue).
export function pValue(p) {
  const v = num(p);
  return Number.isFinite(v) ? String(Number(v.toPrecision(3))) : '—';
}

// "passes (p = 0.43)", "rejected (p = 0.000301)" or "untested: why".
export function lackOfFitText(lackOfFit) {
  const verdict = lackOfFit?.verdict;
  if (verdict === 'LACK_OF_FIT_VERDICT_PASSES') return `passes (p = ${pValue(lackOfFit.p_value)})`;
  if (verdict === 'LACK_OF_FIT_VERDICT_REJECTED') return `rejected (p = ${pValue(lackOfFit.p_value)})`;
  return `untested: ${lackOfFit?.note || ''}`;
}

// "24.1% [15.0% – 40.0%]" for a point optimum with its bracket, else "none: reason".
export function pointOptimumText(optimum) {
  if (optimum.status !== 'OPTIMUM_STATUS_BRACKETED') return `none: ${optimum.reason}`;
  const bracket = optimum.activation_rate_interval;
  return bracket
      ? `${percent(optimum.activation_rate)} [${percent(bracket.low)} – ${percent(bracket.high)}]`
      : percent(optimum.activation_rate);
}

// "p = 0.031" or "—" without a Welch test (a side with one seed).
export function welchText(delta) {
  return delta.welch_p === undefined || delta.welch_p === null ? '—' : `p = ${pValue(delta.welch_p)}`;
}
