"""What zkcdc shows people: `zkcdc ui` (a live web view), `zkcdc report` (an incident as one
HTML file) and `zkcdc alerts tail` (the alerts topic in a terminal)."""
