// The sign-in form: POST /console/api/signin with the access key; the server sets the session
// cookie (HttpOnly) and the console opens. A refusal shows the server's AWS-shaped error.
const form = document.getElementById('signin');
const errorBox = document.getElementById('signin-error');

function showError(type, message) {
  errorBox.textContent = '';
  const strong = document.createElement('strong');
  strong.textContent = type ? type + ': ' : '';
  errorBox.append(strong, document.createTextNode(message || 'sign-in failed'));
  errorBox.hidden = false;
}

form.addEventListener('submit', async (e) => {
  e.preventDefault();
  const button = form.querySelector('button');
  button.disabled = true;
  errorBox.hidden = true;
  try {
    const r = await fetch('/console/api/signin', {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ accessKeyId: form.accessKeyId.value.trim(), secretAccessKey: form.secretAccessKey.value }),
    });
    let body = {};
    try { body = await r.json(); } catch { body = {}; }
    if (r.ok) {
      location.assign('/console/');
      return;
    }
    showError(body.__type || r.headers.get('x-amzn-ErrorType') || `HTTP ${r.status}`, body.message || body.Message || r.statusText);
  } catch (err) {
    showError('NetworkError', err.message);
  } finally {
    button.disabled = false;
  }
});
