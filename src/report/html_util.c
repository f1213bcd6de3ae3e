/* The pieces every section of the HTML report uses (html.h, report layer): HTML escaping, reading a number or
 * a string out of a document, a duration in readable units, a part's colour and a legend. Shared by html.c,
 * html_compare.c, html_graph.c and html_timeline.c. */
#include <math.h>
#include <string.h>

#include "report/html.h"

void html_esc(strbuf *sb, const char *s) {
  for (; s && *s; s++) {
    switch (*s) {
    case '<': sb_puts(sb, "&lt;"); break;
    case '>': sb_puts(sb, "&gt;"); break;
    case '&': sb_puts(sb, "&amp;"); break;
    case '"': sb_puts(sb, "&quot;"); break;
    default: sb_printf(sb, "%c", *s);
    }
  }
}

double html_num(json_t *obj, const char *key) {
  json_t *v = obj ? json_object_get(obj, key) : NULL;
  return json_is_number(v) ? json_number_value(v) : NAN;
}

const char *html_str(json_t *obj, const char *key) {
  json_t *v = obj ? json_object_get(obj, key) : NULL;
  return json_is_string(v) ? json_string_value(v) : NULL;
}

/* "1.23 s", "45.6 ms", "789 µs". */
void html_put_time(strbuf *sb, double s) {
  if (!isfinite(s)) sb_puts(sb, "–");
  else if (s >= 1) sb_printf(sb, "%.3g s", s);
  else if (s >= 1e-3) sb_printf(sb, "%.3g ms", s * 1e3);
  else sb_printf(sb, "%.3g µs", s * 1e6);
}

/* "4.2 GiB". */
void html_put_bytes(strbuf *sb, double b) {
  if (!isfinite(b)) sb_puts(sb, "–");
  else sb_printf(sb, "%.1f GiB", b / 1073741824.0);
}

const char *html_style_color(const html_part_style *t, size_t n, const char *key) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(t[i].key, key) == 0) return t[i].color;
  return "#999999";
}

void html_legend_open(strbuf *sb) { sb_puts(sb, "<div class=\"legend\">"); }
void html_legend_close(strbuf *sb) { sb_puts(sb, "</div>\n"); }

/* A swatch is an <i> whose colour is its background (box, dot, line) or its border (dashed line, outline), so
 * that the colour of every mark can be matched with its legend entry (tests/python/test_report.py). */
void html_legend_item(strbuf *sb, const char *color, const char *label, html_swatch shape) {
  static const char *const cls[] = {[HTML_SW_BOX] = "sw-box", [HTML_SW_DOT] = "sw-dot", [HTML_SW_LINE] = "sw-line",
                                    [HTML_SW_DASH] = "sw-dash", [HTML_SW_OUTLINE] = "sw-outline", [HTML_SW_TRIANGLE] = "sw-tri"};
  bool border = shape == HTML_SW_DASH || shape == HTML_SW_OUTLINE || shape == HTML_SW_TRIANGLE;
  sb_printf(sb, "<span class=\"key\"><i class=\"%s\" style=\"%s:%s\"></i>", cls[shape],
            shape == HTML_SW_TRIANGLE ? "border-bottom-color" : border ? "border-color" : "background", color);
  html_esc(sb, label);
  sb_puts(sb, "</span>");
}

void html_legend(strbuf *sb, const html_part_style *t, size_t n) {
  html_legend_open(sb);
  for (size_t i = 0; i < n; i++) html_legend_item(sb, t[i].color, t[i].label, HTML_SW_BOX);
  html_legend_close(sb);
}
