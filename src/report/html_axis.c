/* Axes of the HTML report's charts (html.h, report layer): a scale from a quantity to pixels, and its axis drawn
 * with ticks at round values, every tick labelled with its unit, light grid lines across the plot and a title.
 * Quantities that cannot be negative (a time, a number of bytes) get linear scales from 0 to a round value at or
 * above the largest shown; a ratio spanning decades (tokens/s, predicted against measured) a log scale with
 * ticks at 1, 2 and 5 of each decade. The round steps are 1, 2, 2.5 and 5 times a power of ten of the unit the
 * axis is labelled in (s, ms or µs; MiB, GiB or TiB), the steps of Heckbert's "Nice numbers for graph labels"
 * (Graphics Gems, 1990). Each axis is a <g class="axis"> that states its quantity, scale and domain
 * (data-quantity, data-scale, data-min, data-max) so that tests read the drawn chart, not its inputs. */
#include <math.h>
#include <stdio.h>

#include "report/html.h"

/* The unit an axis is labelled in: the largest whose value at hi is at least 1 (time) or at least 1 (bytes,
 * GiB from 1 GiB, TiB from 4 TiB up, MiB below). */
static void axis_unit(html_quantity q, double hi, double *div, const char **name) {
  *div = 1, *name = "";
  if (q == HTML_Q_TIME) {
    if (hi >= 1) *div = 1, *name = "s";
    else if (hi >= 1e-3) *div = 1e-3, *name = "ms";
    else *div = 1e-6, *name = "µs";
  } else if (q == HTML_Q_BYTES) {
    if (hi >= 4.0 * 1099511627776.0) *div = 1099511627776.0, *name = "TiB";
    else if (hi >= 1073741824.0) *div = 1073741824.0, *name = "GiB";
    else *div = 1048576.0, *name = "MiB";
  }
}

/* The round step of an axis over [0, span] (in the axis's unit): among 1, 2, 2.5 and 5 times a power of ten,
 * the one whose last tick at or above span comes closest to it with 4 to 10 intervals, so that the axis ends
 * near the data. */
static double nice_step(double span) {
  if (!(span > 0) || !isfinite(span)) return 1;
  static const double mant[] = {1, 2, 2.5, 5};
  double best = 0, best_top = INFINITY;
  for (double p = pow(10, floor(log10(span / 10)) - 1); p <= span; p *= 10)
    for (size_t k = 0; k < sizeof mant / sizeof *mant; k++) {
      double step = mant[k] * p, n = ceil(span / step - 1e-9);
      if (n < 4 || n > 10) continue;
      if (n * step < best_top - 1e-12 * span) best = step, best_top = n * step;
    }
  return best > 0 ? best : span / 5;
}

html_scale html_scale_zero(html_quantity q, double hi, double p0, double p1) {
  double div;
  const char *unit;
  if (!(hi > 0) || !isfinite(hi)) hi = 1;
  axis_unit(q, hi, &div, &unit);
  double step = nice_step(hi / div);
  double top = ceil(hi / div / step - 1e-9) * step * div;
  return (html_scale){0, top > 0 ? top : hi, p0, p1, false, q};
}

/* The largest of 1, 2 and 5 times a power of ten at or below v (up: the smallest at or above). */
static double round125(double v, bool up) {
  double p = pow(10, floor(log10(v))), m[] = {1, 2, 5, 10};
  if (up) {
    for (int k = 0; k < 4; k++)
      if (m[k] * p >= v * (1 - 1e-12)) return m[k] * p;
    return 10 * p;
  }
  for (int k = 3; k >= 0; k--)
    if (m[k] * p <= v * (1 + 1e-12)) return m[k] * p;
  return p;
}

html_scale html_scale_log(html_quantity q, double lo, double hi, double p0, double p1) {
  if (!(lo > 0) || !isfinite(lo)) lo = 1;
  if (!(hi > lo) || !isfinite(hi)) hi = lo * 10;
  return (html_scale){round125(lo, false), round125(hi, true), p0, p1, true, q};
}

double html_px(const html_scale *s, double v) {
  double f = s->log ? (log10(v) - log10(s->v0)) / (log10(s->v1) - log10(s->v0)) : (v - s->v0) / (s->v1 - s->v0);
  return s->p0 + f * (s->p1 - s->p0);
}

/* "20 GiB", "2.5 ms", "0 s"; a count as "500", "20k", "1.5M". */
void html_put_tick(strbuf *sb, const html_scale *s, double v) {
  double div;
  const char *unit;
  axis_unit(s->q, s->v1, &div, &unit);
  double x = v / div;
  if (fabs(x) < 1e-12) x = 0;
  if (s->q == HTML_Q_COUNT) {
    if (x >= 1e6) sb_printf(sb, "%gM", round(x / 1e5) / 10);
    else if (x >= 1e3) sb_printf(sb, "%gk", round(x / 1e2) / 10);
    else sb_printf(sb, "%g", round(x * 1000) / 1000);
    return;
  }
  sb_printf(sb, "%g %s", round(x * 1000) / 1000, unit);
}

/* The tick values of s into v[0..n), ascending; returns n (at most max). */
static int ticks(const html_scale *s, double *v, int max) {
  int n = 0;
  if (s->log) {
    static const double mant[] = {1, 2, 5};
    double decades = log10(s->v1 / s->v0);
    for (double p = pow(10, floor(log10(s->v0))); p <= s->v1 * 1.0001 && n < max; p *= 10)
      for (int k = 0; k < 3 && n < max; k++) {
        if (decades > 2.5 && k > 0) continue; /* whole decades only when there are many */
        double t = mant[k] * p;
        if (t >= s->v0 * 0.9999 && t <= s->v1 * 1.0001) v[n++] = t;
      }
    return n;
  }
  double div;
  const char *unit;
  axis_unit(s->q, s->v1, &div, &unit);
  double step = nice_step((s->v1 - s->v0) / div) * div;
  for (double t = s->v0; t <= s->v1 + step * 1e-6 && n < max; t += step) v[n++] = t;
  return n;
}

void html_axis(strbuf *sb, const html_scale *s, bool vertical, double at, double grid_to, const char *title) {
  double lo = fmin(s->p0, s->p1), hi = fmax(s->p0, s->p1);
  static const char *const qname[] = {[HTML_Q_TIME] = "time", [HTML_Q_BYTES] = "bytes", [HTML_Q_COUNT] = "count"};
  sb_printf(sb, "<g class=\"axis\" data-axis=\"%c\" data-quantity=\"%s\" data-scale=\"%s\" data-min=\"%.17g\" data-max=\"%.17g\">",
            vertical ? 'y' : 'x', qname[s->q], s->log ? "log" : "linear", s->v0, s->v1);
  if (vertical) sb_printf(sb, "<line class=\"axis-line\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>", at, at, lo, hi);
  else sb_printf(sb, "<line class=\"axis-line\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>", lo, hi, at, at);
  double v[40];
  int n = ticks(s, v, 40);
  for (int i = 0; i < n; i++) {
    double p = html_px(s, v[i]);
    if (vertical) {
      if (isfinite(grid_to)) sb_printf(sb, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>", at, grid_to, p, p);
      sb_printf(sb, "<line class=\"tick\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/><text class=\"tick-label\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">",
                at - 5, at, p, p, at - 7, p + 4);
    } else {
      if (isfinite(grid_to)) sb_printf(sb, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>", p, p, at, grid_to);
      sb_printf(sb, "<line class=\"tick\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/><text class=\"tick-label\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">",
                p, p, at, at + 5, p, at + 17);
    }
    html_put_tick(sb, s, v[i]);
    sb_puts(sb, "</text>");
  }
  if (title) {
    if (vertical)
      sb_printf(sb, "<text class=\"axis-title\" transform=\"translate(%.1f,%.1f) rotate(-90)\" text-anchor=\"middle\">", at - 62,
                (lo + hi) / 2);
    else sb_printf(sb, "<text class=\"axis-title\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", (lo + hi) / 2, at + 34);
    html_esc(sb, title);
    sb_puts(sb, "</text>");
  }
  sb_puts(sb, "</g>\n");
}
