// Installed as /etc/thunderbird/pref/hcu.js (beside Debian's thunderbird.js) on the test desktop: nothing reaches for the internet at start
// and no first-run dialog covers the window. Profiles the tasks unpack keep their own prefs.js on top.
pref("mail.shell.checkDefaultClient", false);
pref("mail.rights.version", 1);
pref("mailnews.start_page.enabled", false);
pref("mailnews.start_page_override.mstone", "ignore");
pref("app.donation.eoy.version.viewed", 999);
pref("mail.inappnotifications.enabled", false);
pref("mail.provider.enabled", false);
pref("app.update.auto", false);
pref("app.update.enabled", false);
pref("extensions.getAddons.cache.enabled", false);
pref("datareporting.policy.dataSubmissionEnabled", false);
pref("datareporting.healthreport.uploadEnabled", false);
pref("toolkit.telemetry.enabled", false);
pref("app.normandy.enabled", false);
pref("network.captive-portal-service.enabled", false);
pref("network.connectivity-service.enabled", false);
// tasks end Thunderbird with pkill: no safe-mode prompt after a few such ends
pref("toolkit.startup.max_resumed_crashes", -1);
