// Applies the theme chosen on this device before the page paints (the toggle in the app writes it).
(function () {
  try {
    var t = localStorage.getItem("porthole-theme");
    if (t === "dark" || t === "light") {
      document.documentElement.setAttribute("data-theme", t);
    }
  } catch (e) { /* storage disabled: follow the system theme */ }
})();
