package auth

import (
	"crypto/hmac"
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// Flash messages ("Team nlp saved.") travel from a change to the page after
// its redirect in a short-lived cookie signed with the console's flash key,
// never in the URL: a link cannot make the console say anything.

const (
	flashCookie = "quota_console_flash"
	flashTTL    = 2 * time.Minute
)

// SetFlash makes msg the message of the next page this browser loads.
func (a *Authenticator) SetFlash(c echo.Context, msg string) {
	a.init()
	exp := strconv.FormatInt(time.Now().Add(flashTTL).Unix(), 10)
	value := base64.RawURLEncoding.EncodeToString([]byte(msg)) + "." + exp + "." +
		base64.RawURLEncoding.EncodeToString(mac(a.Keys.flash, a.Keys.bound, msg, exp))
	c.SetCookie(a.cookie(c.Request(), flashCookie, value, time.Now().Add(flashTTL)))
}

// TakeFlash returns the message SetFlash left, once, and clears it; "" when
// there is none, or it is forged or too old.
func (a *Authenticator) TakeFlash(c echo.Context) string {
	a.init()
	ck, err := c.Cookie(a.cookieName(c.Request(), flashCookie))
	if err != nil {
		return ""
	}
	a.clearCookie(c, flashCookie)
	parts := strings.Split(ck.Value, ".")
	if len(parts) != 3 {
		return ""
	}
	msg, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	sig, err2 := base64.RawURLEncoding.DecodeString(parts[2])
	exp, err3 := strconv.ParseInt(parts[1], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || time.Now().Unix() > exp ||
		!hmac.Equal(sig, mac(a.Keys.flash, a.Keys.bound, string(msg), parts[1])) {
		return ""
	}
	return string(msg)
}
