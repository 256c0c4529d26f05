// The chat page's small behaviours: keyboard, URL, watching the shown session, copy, scroll.
(function () {
  "use strict";
  let socket = null;

  function currentSessionId() {
    const field = document.getElementById("composer-session");
    return field ? field.value : "";
  }

  function lastAnswer() {
    const answers = document.querySelectorAll("#messages [data-testid=assistant-message]");
    return answers.length ? answers[answers.length - 1] : null;
  }

  // Tell the server which session this page shows, so it streams that one (again, after a
  // reconnect: it then re-sends whatever changed while we were away).
  function watch() {
    if (!socket) return;
    const last = lastAnswer();
    socket.send(JSON.stringify({
      action: "watch",
      session_id: currentSessionId(),
      last_run_id: last ? last.dataset.runId : "",
      last_run_status: last ? last.dataset.runStatus : "",
    }));
  }

  function nearBottom(el) {
    return el.scrollHeight - el.scrollTop - el.clientHeight < 120;
  }

  function scrollToEnd(force) {
    const box = document.getElementById("messages");
    if (box && (force || box.dataset.stick !== "false")) box.scrollTop = box.scrollHeight;
  }

  function followSession() {
    const id = currentSessionId();
    if (!id) return;
    const path = "/s/" + id + "/";
    if (window.location.pathname !== path) history.pushState({}, "", path);
    document.querySelectorAll("#session-list .session-item").forEach(function (item) {
      item.classList.toggle("current", item.dataset.sessionId === id);
    });
    const conversation = document.getElementById("conversation");
    if (conversation) conversation.dataset.sessionId = id;
  }

  // The browser title follows the shown session's title (a rename, a generated title).
  function syncTitle() {
    const heading = document.getElementById("session-title");
    if (!heading) return;
    document.title = currentSessionId() ? heading.textContent.trim() + " · Parley" : "Parley";
  }

  // While the socket is down nothing can be sent: say so, and disable the composer's buttons
  // (Send, Stop; Enter checks Send). The open handler below enables them again.
  function connectionLost() {
    socket = null;
    const notice = document.getElementById("connection-notice");
    if (notice) notice.hidden = signedOut;
    const chat = document.getElementById("chat");
    if (chat) chat.classList.add("offline");
    document.querySelectorAll("#composer button:not([disabled])").forEach(function (button) {
      button.setAttribute("data-until-connected", "");
      button.disabled = true;
    });
  }

  document.addEventListener("htmx:wsOpen", function (event) {
    socket = event.detail.socketWrapper;
    const notice = document.getElementById("connection-notice");
    if (notice) notice.hidden = true;
    const chat = document.getElementById("chat");
    if (chat) chat.classList.remove("offline");
    document.querySelectorAll("[data-until-connected]").forEach(function (button) {
      button.removeAttribute("data-until-connected");
      button.disabled = false;
    });
    watch();
  });
  // A sign-in that ended (4401: signed out, or the password changed elsewhere; 4403: the
  // account was deactivated) does not come back: the server's notice says why, and the page
  // stops saying "Reconnecting…".
  let signedOut = false;
  document.addEventListener("htmx:wsClose", function (event) {
    const code = event.detail.event ? event.detail.event.code : 0;
    if (code === 4401 || code === 4403) signedOut = true;
    connectionLost();
  });
  document.addEventListener("htmx:wsError", connectionLost);

  document.addEventListener("htmx:wsAfterMessage", function () {
    followSession();
    syncTitle();
    scrollToEnd(false);
  });

  document.addEventListener("htmx:wsAfterSend", function (event) {
    const form = event.target.closest && event.target.closest("#composer");
    if (form && event.target === form) {
      form.querySelector("textarea").value = "";
      scrollToEnd(true);
    }
  });

  // A new conversation pane (sidebar click): watch its session once htmx has settled it. htmx
  // wires the new form to the socket (ws-send) only then, 20 ms after the swap; watching at the
  // swap let the server's answer enable Send before that, and an Enter in between submitted the
  // form as a plain page load.
  document.addEventListener("htmx:afterSettle", function (event) {
    if (event.detail.target && event.detail.target.id === "pane") {
      watch();
      followSession();
      scrollToEnd(true);
    }
    syncTitle();
  });

  // The composer goes over the socket only: never as a page load, which would put the message
  // in the URL and send nothing. (ws-send's own handler on the form has run by now.)
  document.addEventListener("submit", function (event) {
    if (event.target.id === "composer") event.preventDefault();
  });

  document.addEventListener("keydown", function (event) {
    const box = event.target;
    if (box.matches && box.matches("[data-testid=chat-input]") && event.key === "Enter"
        && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      const send = document.querySelector("[data-testid=chat-send]");
      if (send && !send.disabled && box.value.trim()) box.form.requestSubmit();
    }
  });

  document.addEventListener("click", function (event) {
    const button = event.target.closest && event.target.closest("[data-copy]");
    if (!button) return;
    const done = function () {
      button.textContent = "Copied";
      setTimeout(function () { button.textContent = "Copy"; }, 1500);
    };
    if (navigator.clipboard) navigator.clipboard.writeText(button.dataset.copy).then(done, done);
  });

  document.addEventListener("scroll", function (event) {
    const box = event.target;
    if (box.id === "messages") box.dataset.stick = nearBottom(box) ? "true" : "false";
  }, true);

  // A refused htmx request (404, 409, …) says why in the notice area instead of failing silently.
  document.addEventListener("htmx:responseError", function (event) {
    const notice = document.getElementById("notice");
    if (!notice) return;
    const alert = document.createElement("div");
    alert.className = "alert";
    alert.setAttribute("role", "alert");
    alert.dataset.testid = "chat-notice";
    const xhr = event.detail.xhr;
    const text = xhr.responseText || "";
    alert.textContent = text && text.length < 300 && text.indexOf("<") === -1
      ? text : (xhr.status === 404 ? "Not found." : "That did not work (" + xhr.status + ").");
    notice.replaceChildren(alert);
  });

  window.addEventListener("popstate", function () { window.location.reload(); });
  document.addEventListener("DOMContentLoaded", function () { scrollToEnd(true); });
})();
