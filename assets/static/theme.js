// Runs in <head>, before the first paint: applies the theme chosen on this device (the toggle
// in the app writes it), and keeps the visual viewport's height and top in CSS variables
// (--porthole-vvh, --porthole-vvtop) so the agent page covers exactly what is visible: with a
// soft keyboard up, its keys bar sits right above the keyboard. Listeners only: no work while
// nothing changes.
(function () {
  try {
    var t = localStorage.getItem("porthole-theme");
    if (t === "dark" || t === "light") {
      document.documentElement.setAttribute("data-theme", t);
    }
  } catch (e) { /* storage disabled: follow the system theme */ }

  var vv = window.visualViewport;
  if (!vv) return;
  var root = document.documentElement.style;
  var h = -1, top = -1;
  var update = function () {
    var nh = Math.round(vv.height), nt = Math.max(0, Math.round(vv.offsetTop));
    if (nh === h && nt === top) return;
    h = nh; top = nt;
    root.setProperty("--porthole-vvh", h + "px");
    root.setProperty("--porthole-vvtop", top + "px");
  };
  update();
  vv.addEventListener("resize", update);
  vv.addEventListener("scroll", update);
})();
