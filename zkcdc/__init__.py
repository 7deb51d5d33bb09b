"""zkcdc."""
