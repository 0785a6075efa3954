// Every visible text's contrast against its effective background, by WCAG 2's formula (axe's color-contrast rule,
// computed in the page: no new dependency). Returns the texts under 4.5:1 (3:1 for large text).
() => {
  const parse = (css) => {
    const found = css.match(/rgba?\(([^)]+)\)/);
    if (!found) return null;
    const p = found[1].split(/[ ,\/]+/).filter(Boolean).map(Number);
    return { r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1 };
  };
  const luminance = ({ r, g, b }) => {
    const channel = (v) => ((v /= 255) <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4));
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
  };
  const over = (top, below) => ({
    r: top.r * top.a + below.r * (1 - top.a),
    g: top.g * top.a + below.g * (1 - top.a),
    b: top.b * top.a + below.b * (1 - top.a),
  });
  const background = (element) => {  // the page's white, then each translucent layer up to the element
    const layers = [];
    for (let e = element; e; e = e.parentElement) {
      const colour = parse(getComputedStyle(e).backgroundColor);
      if (colour && colour.a > 0) {
        layers.push(colour);
        if (colour.a >= 1) break;
      }
    }
    return layers.reverse().reduce((below, top) => over(top, below), { r: 255, g: 255, b: 255 });
  };
  const low = [];
  const seen = new Set();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const element = walker.currentNode.parentElement;
    if (!element || seen.has(element) || !walker.currentNode.textContent.trim()) continue;
    seen.add(element);
    const style = getComputedStyle(element);
    const box = element.getBoundingClientRect();
    const hidden = style.visibility === "hidden" || style.display === "none" || parseFloat(style.opacity) === 0;
    if (hidden || box.width === 0 || box.height === 0 || parse(style.color).a === 0) continue;  // masks draw no text
    const below = background(element);
    const text = over(parse(style.color), below);
    const [light, dark] = [luminance(text), luminance(below)].sort((a, b) => b - a);
    const ratio = (light + 0.05) / (dark + 0.05);
    const size = parseFloat(style.fontSize);
    const large = size >= 24 || (parseInt(style.fontWeight) >= 700 && size >= 18.66);
    if (ratio < (large ? 3 : 4.5)) {
      low.push({ text: walker.currentNode.textContent.trim().slice(0, 40), ratio: Math.round(ratio * 100) / 100,
                 color: style.color, element: element.tagName + "." + element.className.toString().slice(0, 40) });
    }
  }
  return low;
}
