// Renders /openapi.yaml with Redoc (its bundle is the script before this
// one), in colours that pass WCAG AA, then mends what Redoc's markup leaves
// to assistive technology (see `mend`).
const target = document.getElementById("reference");

// Text on its background at 4.5:1 or more; Redoc's defaults are lighter.
const theme = {
  colors: {
    primary: { main: "#1f5f99" },
    text: { primary: "#1f2328", secondary: "#4a5259" },
    responses: {
      // `tabTextColor`: the samples' tabs, on the dark right panel.
      success: { color: "#1b6b24", backgroundColor: "#e9f5ea", tabTextColor: "#8fd694" },
      error: { color: "#b3261e", backgroundColor: "#fbeaea", tabTextColor: "#ff9a8f" },
      redirect: { color: "#7a4400", backgroundColor: "#fdf1e3", tabTextColor: "#ffc46b" },
      info: { color: "#1f5f99", backgroundColor: "#eaf1f8", tabTextColor: "#8cc4f5" },
    },
  },
  typography: {
    code: { color: "#9c1c14", backgroundColor: "#f4f5f5" },
    links: { color: "#1f5f99" },
  },
};

// Redoc names a menu entry by its summary alone while it shows the method
// beside it, and leaves the media-type <select> unnamed: each is given the
// name a reader sees. Run again whenever Redoc renders more.
function mend() {
  for (const item of document.querySelectorAll("li[aria-label]")) {
    const shown = item.textContent.replace(/\s+/g, " ").trim();
    if (shown && item.getAttribute("aria-label") !== shown) item.setAttribute("aria-label", shown);
  }
  for (const select of document.querySelectorAll("select:not([aria-label])")) {
    select.setAttribute("aria-label", "Media type");
  }
}

let pending = false;
new MutationObserver(() => {
  if (pending) return;
  pending = true;
  requestAnimationFrame(() => {
    pending = false;
    mend();
  });
}).observe(target, { childList: true, subtree: true });

window.Redoc.init("/openapi.yaml", { expandResponses: "200,201", theme }, target, () => {
  mend();
  document.documentElement.setAttribute("data-rendered", "true");
});
